// Fixtures for cluster tests: a private redis-server, aenv-scheduler processes and fake nodes
// (stand-ins that heartbeat like a node's cluster agent).
export { pingRedis, redisMissing, startRedis, type RedisProcess } from './redis.js';
export {
  CLUSTER_KEY,
  startSchedulerProcess,
  type SchedulerProcess,
  type SchedulerProcessOptions,
} from './scheduler-process.js';
export { FakeNode, type FakeNodeOptions } from './fake-node.js';

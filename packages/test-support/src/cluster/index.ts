// Fixtures for cluster tests: a private redis-server, aenv-scheduler processes, fake nodes
// (stand-ins that heartbeat like a node's cluster agent), and a real cluster of them all
// (TestCluster: the launcher's parts in the tests' layout) for tests and benches.
export { redisMissing, startRedis, type RedisProcess } from './redis.js';
export {
  CLUSTER_KEY,
  startSchedulerProcess,
  type SchedulerProcess,
  type SchedulerProcessOptions,
} from './scheduler-process.js';
export { FakeNode, type FakeNodeOptions } from './fake-node.js';
export {
  SNAPSHOT_STORE as TEST_CLUSTER_STORE,
  TestCluster,
  type ClusterOptions,
  type NodeView,
} from './test-cluster.js';
export {
  startNode,
  TEST_CLUSTER_DOMAIN,
  TEST_CLUSTER_HOME,
  TEST_CLUSTER_KEY,
  TEST_CLUSTER_LAYOUT,
  testNodePlace,
  type NodeSpec,
} from './test-layout.js';
export { pingRedis, removeCgroups, type Proc } from '../launcher/index.js';

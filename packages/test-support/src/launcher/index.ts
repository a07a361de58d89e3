// Launches a cluster's real processes (redis-server, schedulers, gateways, aenv-server nodes) as
// a ClusterLayout places them: `npm run cluster` and the tests' TestCluster are two layouts of it.
// Nothing here is test-only, so scripts may import it.
export { logDir, snapshotStore, type ClusterLayout, type NodePlace } from './layout.js';
export { ClusterLauncher, GATEWAY_BIN, launchNode, type LaunchOptions } from './launcher.js';
export { spawnProc, statusOf, untilReady, type HealthCheck, type Proc, type SpawnOptions } from './part.js';
export { pingRedis } from './redis.js';
export { removeCgroups } from './cgroups.js';

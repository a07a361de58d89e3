export { KeyedMutex } from './keyed-mutex.js';
export {
  runProcess,
  launchProcessesWith,
  type ProcessLauncher,
  type ProcessOptions,
  type ProcessResult,
} from './subprocess.js';
export { ProcessSpawner } from './spawner/client.js';
export { FreshConnectionAgent, requestOnce, type FreshRequest, type SizedBody } from './fresh-connection.js';
export { systemClock, isoTime, type Clock, type Timer } from './clock.js';
export { probeListen } from './listen-probe.js';
export { packageFile } from './package-file.js';

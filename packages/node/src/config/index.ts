export { ConfigError, defaults, loadConfig, parseListenAddress } from './load.js';
export type { NodeConfig } from './schema.js';

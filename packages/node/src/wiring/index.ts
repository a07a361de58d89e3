export { openSnapshotRepository } from './snapshot-repository.js';
export { createDriver, type DriverPlacement } from './runtime-driver.js';
export { prepareHost, type NodeHost } from './host.js';
export { openTemplates, type NodeTemplates } from './templates.js';
export { startChunkExchange } from './chunk-exchange.js';

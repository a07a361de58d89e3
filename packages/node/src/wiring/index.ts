export { openSnapshotRepository } from './snapshot-repository.js';
export { createDriver, type DriverPlacement } from './runtime-driver.js';

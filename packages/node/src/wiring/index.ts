export { openSnapshotRepository } from './snapshot-repository.js';

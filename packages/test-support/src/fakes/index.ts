export { Faults, type Hold } from './faults.js';
export { FakeClock } from './clock.js';
export { FakeDisk, fakeCaptureMeta, type FakeCapture } from './disk.js';
export { FakeDriver, type DriverStep } from './driver.js';
export { FakeSlots, type SlotStep } from './slots.js';
export { MemoryRecordStore } from './records.js';
export { FakeCaptureDirs } from './captures.js';
export { FakePauses, FakePauseStorage, type PauseStep } from './pauses.js';
export { FakeSnapshotCatalog, type SnapshotStep } from './snapshots.js';
export { FakeEnvd, type EnvdStep } from './envd.js';
export { FakeTemplates, fakeImages } from './templates.js';
export { FakeNode, RecordingObserver, createInput, sandboxRecord, type FakeNodeOptions } from './node.js';
export { rejection, until } from './helpers.js';
export { MemoryObjectRepository } from './repository.js';
export {
  fakeApp,
  useFakeApp,
  FAKE_API_KEY,
  type FakeApp,
  type FakeAppMethod,
  type FakeAppOptions,
} from './app.js';

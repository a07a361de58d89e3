export type * from './driver.js';
export * from './errors.js';
export { readCapture, CAPTURE_META_FILE } from './capture.js';
export { newSandboxId, isSandboxId } from './ids.js';
export { GvisorDriver, type GvisorDriverOptions, type UpperMedium } from './gvisor/driver.js';

import type { Resources } from './driver.js';

/** What a sandbox gets when neither its template nor its create request says otherwise. */
export const DEFAULT_RESOURCES: Resources = { cpuCount: 2, memoryMB: 1024, diskSizeMB: 2048 };

export type * from './driver.js';
export * from './errors.js';
export { DEFAULT_RESOURCES } from './resources.js';
export { probeHealth, waitForHealth, type WaitOptions } from './readiness.js';
export { GvisorDriver, type GvisorDriverOptions, type UpperMedium } from './gvisor/driver.js';
export { unmountBelow } from './gvisor/mounts.js';
// The gVisor driver's own runsc calls, for the bare-runsc baseline of the benches.
export { inspectGvisorHost, type GvisorHost } from './gvisor/host.js';
export { buildOciSpec } from './gvisor/oci-spec.js';
export { volumesDir, volumesMount } from './gvisor/volumes.js';
export { runCommand as runscCommand, runscGlobalArgs, wrapForNetSysctlQuirk } from './gvisor/runsc.js';
export { runDetached, reaperAvailable, DEFAULT_REAPER_PATH } from './gvisor/reaper.js';

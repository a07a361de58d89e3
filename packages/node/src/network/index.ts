/**
 * Sandbox networking. The node creates one NetworkManager at start (it reclaims leftovers of a
 * crashed predecessor with the same nodeTag) and shuts it down last. Per sandbox:
 *
 *   const slot = await network.acquire(egress);   // netns ready, address in place
 *   // runtime: run runsc with the OCI network namespace path = slot.netnsPath, wrapped in
 *   // `unshare -m --propagation private` + tmpfs on /proc/sys/net if needsProcSysNetWorkaround()
 *   // the node dials `${slot.hostAddress}:${port}`
 *   await slot.reset();                            // before every later start/restore in the slot
 *   await network.setEgress(slot, rules);          // any time
 *   await network.release(slot);                   // after the sandbox is gone
 *
 * Topology (see slot-ops.ts): root ns ⇄ per-slot router ns (NAT, egress filter) ⇄ sandbox ns.
 */
export { DEFAULT_ALWAYS_DENIED, defaultNetworkConfig, resolveNetworkConfig } from './config.js';
export type { IptablesFlavour, NetworkConfig, ResolvedNetworkConfig } from './config.js';
export type { NetworkLogger } from './context.js';
export { defaultEgress, normalizeEgressEntry, sameEgress, validateEgressRules } from './egress.js';
export { needsProcSysNetWorkaround } from './environment.js';
export type { NetworkEnvironment } from './environment.js';
export { NetworkError, NETWORK_ERROR_KIND } from './errors.js';
export type { NetworkErrorCode } from './errors.js';
export { ManagedSlot } from './managed-slot.js';
export { NetworkManager } from './manager.js';
export type { NetworkManagerOptions, NetworkStats } from './manager.js';
export type { EgressRules, NetSlot } from './slot.js';

import { NetworkError } from './errors.js';

/**
 * Names of everything a node creates. Every name carries the node's tag, so two node processes on
 * one machine never touch each other's resources, and a restarted node finds exactly the leftovers
 * of its crashed predecessor by prefix. Tags are [a-z0-9] only: with the "-" separator no tag's
 * prefix is a prefix of another tag's ("ae-n1-" never matches "ae-n12-3").
 */

const TAG = /^[a-z0-9]{1,6}$/;
/** Linux interface names hold at most 15 characters (IFNAMSIZ minus the NUL). */
const MAX_INTERFACE_NAME = 15;

/** Interface names inside the per-slot namespaces: fixed, since each namespace holds one slot. */
export const ROUTER_UPLINK = 'up0';
export const ROUTER_GATEWAY = 'gw0';
export const SANDBOX_INTERFACE = 'eth0';
/**
 * Fixed MAC addresses (locally administered) for the router↔sandbox link, so a restored sandbox
 * finds the same gateway MAC it had cached and keeps its own: restored copies are identical at L2
 * too. Each pair lives in its own namespaces, so reusing them in every slot never collides.
 */
export const GATEWAY_MAC = '02:ae:00:00:00:01';
export const SANDBOX_MAC = '02:ae:00:00:00:02';

export function validateNodeTag(tag: string): void {
  if (!TAG.test(tag)) {
    throw new NetworkError('INVALID_CONFIG', `nodeTag must be 1-6 characters of [a-z0-9], got "${tag}"`);
  }
}

export interface ResourcePrefixes {
  /** Network namespaces: `aenv-<tag>-r<N>` (router) and `aenv-<tag>-s<N>` (sandbox). */
  readonly namespace: string;
  /** Host-side veth in the root namespace: `ae-<tag>-<N>`. */
  readonly veth: string;
  /** iptables interface wildcard matching every host-side veth of this node. */
  readonly vethWildcard: string;
  /** iptables chains in the root namespace. */
  readonly chain: string;
}

export function resourcePrefixes(tag: string): ResourcePrefixes {
  return {
    namespace: `aenv-${tag}-`,
    veth: `ae-${tag}-`,
    vethWildcard: `ae-${tag}-+`,
    chain: `AENV-${tag}-`,
  };
}

export interface ChainNames {
  /** filter table, jumped to from FORWARD. */
  readonly forward: string;
  /** filter table, jumped to from INPUT. */
  readonly input: string;
  /** nat table, jumped to from POSTROUTING. */
  readonly postrouting: string;
}

export function chainNames(tag: string): ChainNames {
  const prefix = resourcePrefixes(tag).chain;
  return { forward: `${prefix}FWD`, input: `${prefix}IN`, postrouting: `${prefix}NAT` };
}

export interface SlotNames {
  readonly routerNs: string;
  readonly sandboxNs: string;
  /** The path the runtime hands to runsc (OCI linux.namespaces network path). */
  readonly sandboxNsPath: string;
  readonly hostVeth: string;
}

export function slotNames(tag: string, index: number): SlotNames {
  const prefixes = resourcePrefixes(tag);
  const sandboxNs = `${prefixes.namespace}s${index}`;
  return {
    routerNs: `${prefixes.namespace}r${index}`,
    sandboxNs,
    sandboxNsPath: `/run/netns/${sandboxNs}`,
    hostVeth: `${prefixes.veth}${index}`,
  };
}

/** Slot indexes must stay below this for `ae-<tag>-<N>` to fit in an interface name. */
export function indexLimitForTag(tag: string): number {
  return 10 ** (MAX_INTERFACE_NAME - resourcePrefixes(tag).veth.length);
}

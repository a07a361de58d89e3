import { slotCapacity } from './addressing.js';
import { defaultEgress, validateEgressRules } from './egress.js';
import { NetworkError } from './errors.js';
import {
  cidrContainsAddress,
  cidrOverlaps,
  formatCidr,
  maskOf,
  parseCidr,
  parseIPv4,
  type Cidr,
} from './ipv4.js';
import { indexLimitForTag, validateNodeTag } from './naming.js';
import type { EgressRules } from './slot.js';

export type IptablesFlavour = 'nft' | 'legacy';

export interface NetworkConfig {
  /**
   * Tag in every name this node creates (namespaces, veths, iptables chains). Two node processes
   * on one machine need different tags and non-overlapping host ranges.
   */
  nodeTag: string;
  /** Host-side addresses, one /31 per slot; must not be routed anywhere else on the machine. */
  hostRange: string;
  /**
   * The sandbox's own address, identical in every slot and baked into every snapshot, so it must
   * be the same on every node that shares snapshots. The default 10.0.2.0/24 exists only inside
   * the per-slot namespaces (never in the root namespace, so it cannot collide with host routes),
   * and lies inside the always-denied 10.0.0.0/8, so being on-link there hides no destination a
   * sandbox would otherwise be allowed to reach.
   */
  sandboxAddress: string;
  /** The router namespace's address on the sandbox link: the sandbox's default gateway. */
  sandboxGateway: string;
  sandboxPrefixLength: number;
  /** Destinations no sandbox reaches, whatever its allowOut says. */
  alwaysDenied: string[];
  /** Ready slots kept in reserve so acquire() rarely waits for namespace creation. */
  poolSize: number;
  /** Egress rules of pooled slots and of acquire() without rules. */
  defaultEgress: EgressRules;
  /** 'auto' uses whichever `iptables` the system selected (update-alternatives on Debian). */
  iptables: 'auto' | IptablesFlavour;
}

/**
 * Every IPv4 range that is private, shared, loopback, link-local or special-purpose (RFC 6890):
 * "this network", IETF protocol assignments, benchmarking, multicast and the reserved class E (with
 * the broadcast address). IPv6 needs no list: it is disabled on every link of a slot, so nothing
 * but the sandbox's own loopback (::1) speaks it and no IPv6 destination (::, fc00::/7, fe80::/10,
 * ff00::/8, …) is reachable; an IPv4-mapped address (::ffff:a.b.c.d) leaves as IPv4 and meets these
 * rules.
 */
export const DEFAULT_ALWAYS_DENIED: readonly string[] = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
];

export function defaultNetworkConfig(): NetworkConfig {
  return {
    nodeTag: 'n0',
    hostRange: '10.201.0.0/16',
    sandboxAddress: '10.0.2.2',
    sandboxGateway: '10.0.2.1',
    sandboxPrefixLength: 24,
    alwaysDenied: [...DEFAULT_ALWAYS_DENIED],
    poolSize: 4,
    defaultEgress: defaultEgress(),
    iptables: 'auto',
  };
}

export const MAX_POOL_SIZE = 256;

export interface ResolvedNetworkConfig extends NetworkConfig {
  readonly hostRangeCidr: Cidr;
  readonly sandboxSubnet: Cidr;
  /** Normalised always-denied CIDRs. */
  readonly alwaysDeniedCidrs: string[];
  /** How many slots can exist at once (host range size and interface-name length). */
  readonly capacity: number;
}

function invalid(message: string): NetworkError {
  return new NetworkError('INVALID_CONFIG', `network config: ${message}`);
}

function parseAddress(field: string, text: string): number {
  const address = parseIPv4(text);
  if (address === undefined) throw invalid(`${field} "${text}" is not an IPv4 address`);
  return address;
}

/** Fills in defaults and rejects configurations that would misroute traffic. */
export function resolveNetworkConfig(options: Partial<NetworkConfig> = {}): ResolvedNetworkConfig {
  const config: NetworkConfig = { ...defaultNetworkConfig(), ...options };
  validateNodeTag(config.nodeTag);

  const hostRangeCidr = parseCidr(config.hostRange);
  if (!hostRangeCidr || !config.hostRange.includes('/')) {
    throw invalid(`hostRange "${config.hostRange}" is not an IPv4 CIDR`);
  }
  if (hostRangeCidr.prefix < 8 || hostRangeCidr.prefix > 30) {
    throw invalid(`hostRange must be between a /8 and a /30, got /${hostRangeCidr.prefix}`);
  }

  const prefix = config.sandboxPrefixLength;
  if (!Number.isInteger(prefix) || prefix < 8 || prefix > 30) {
    throw invalid(`sandboxPrefixLength must be an integer from 8 to 30, got ${prefix}`);
  }
  const sandbox = parseAddress('sandboxAddress', config.sandboxAddress);
  const gateway = parseAddress('sandboxGateway', config.sandboxGateway);
  const sandboxSubnet: Cidr = { network: (sandbox & maskOf(prefix)) >>> 0, prefix };
  const broadcast = (sandboxSubnet.network | ~maskOf(prefix)) >>> 0;
  if (!cidrContainsAddress(sandboxSubnet, gateway)) {
    throw invalid(`sandboxGateway ${config.sandboxGateway} is outside ${formatCidr(sandboxSubnet)}`);
  }
  for (const [field, address] of [
    ['sandboxAddress', sandbox],
    ['sandboxGateway', gateway],
  ] as const) {
    if (address === sandboxSubnet.network || address === broadcast) {
      throw invalid(`${field} must not be the network or broadcast address of ${formatCidr(sandboxSubnet)}`);
    }
  }
  if (sandbox === gateway) throw invalid('sandboxAddress and sandboxGateway must differ');
  // Both ranges are routed inside every router namespace; overlapping, one would shadow the other.
  if (cidrOverlaps(sandboxSubnet, hostRangeCidr)) {
    throw invalid(`sandbox subnet ${formatCidr(sandboxSubnet)} overlaps hostRange ${config.hostRange}`);
  }

  const alwaysDeniedCidrs = config.alwaysDenied.map((entry) => {
    const cidr = parseCidr(entry.trim());
    if (!cidr) throw invalid(`alwaysDenied entry "${entry}" is not an IPv4 address or CIDR`);
    return formatCidr(cidr);
  });

  if (!Number.isInteger(config.poolSize) || config.poolSize < 0 || config.poolSize > MAX_POOL_SIZE) {
    throw invalid(`poolSize must be an integer from 0 to ${MAX_POOL_SIZE}, got ${config.poolSize}`);
  }
  if (!['auto', 'nft', 'legacy'].includes(config.iptables)) {
    throw invalid(`iptables must be auto, nft or legacy, got "${config.iptables}"`);
  }

  return {
    ...config,
    defaultEgress: validateEgressRules(config.defaultEgress),
    hostRangeCidr,
    sandboxSubnet,
    alwaysDeniedCidrs,
    capacity: slotCapacity(hostRangeCidr, indexLimitForTag(config.nodeTag)),
  };
}

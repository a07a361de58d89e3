import { NetworkError } from './errors.js';
import { formatCidr, parseCidr } from './ipv4.js';
import type { EgressRules } from './slot.js';

/** Every entry becomes one iptables rule evaluated per outgoing packet, so the lists are bounded. */
export const MAX_EGRESS_ENTRIES = 512;

/** Internet allowed, no extra rules: what a sandbox gets unless its creator says otherwise. */
export function defaultEgress(): EgressRules {
  return { allowInternet: true, allowOut: [], denyOut: [] };
}

// A name with at least one letter: "example.com", "*.example.com", "localhost".
const DOMAIN = /^(\*\.)?(?=[^/]*[a-z])[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i;

/**
 * One allow/deny entry, normalised to "a.b.c.d/n". Domains are refused rather than resolved once:
 * a resolved name silently goes stale when the domain's addresses change.
 */
export function normalizeEgressEntry(entry: unknown, field: string): string {
  if (typeof entry !== 'string') {
    throw new NetworkError('INVALID_CIDR', `${field}: every entry must be a string, got ${typeof entry}`);
  }
  const text = entry.trim();
  const cidr = parseCidr(text);
  if (cidr) return formatCidr(cidr);
  if (text.includes(':')) {
    throw new NetworkError(
      'INVALID_CIDR',
      `${field}: "${text}" is IPv6; sandboxes have IPv4 only, use IPv4 addresses or CIDRs`,
    );
  }
  if (DOMAIN.test(text)) {
    throw new NetworkError(
      'DOMAIN_NOT_SUPPORTED',
      `${field}: domain entries are not supported ("${text}"); use IPv4 addresses or CIDRs`,
    );
  }
  throw new NetworkError(
    'INVALID_CIDR',
    `${field}: "${text}" is not an IPv4 address or CIDR (expected e.g. 203.0.113.7 or 203.0.113.0/24)`,
  );
}

function normalizeList(list: unknown, field: string): string[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw new NetworkError('INVALID_CIDR', `${field} must be an array of CIDRs`);
  if (list.length > MAX_EGRESS_ENTRIES) {
    throw new NetworkError(
      'INVALID_CIDR',
      `${field} has ${list.length} entries; at most ${MAX_EGRESS_ENTRIES}`,
    );
  }
  return [...new Set(list.map((entry) => normalizeEgressEntry(entry, field)))];
}

/**
 * Checks untrusted egress rules (shape and every CIDR) and returns them normalised. Missing lists
 * mean empty; a missing allowInternet means true (the documented default).
 */
export function validateEgressRules(input: unknown): EgressRules {
  if (input === null || typeof input !== 'object') {
    throw new NetworkError('INVALID_CIDR', 'egress rules must be an object');
  }
  const rules = input as Partial<Record<keyof EgressRules, unknown>>;
  if (rules.allowInternet !== undefined && typeof rules.allowInternet !== 'boolean') {
    throw new NetworkError('INVALID_CIDR', 'allowInternet must be a boolean');
  }
  return {
    allowInternet: rules.allowInternet ?? true,
    allowOut: normalizeList(rules.allowOut, 'allowOut'),
    denyOut: normalizeList(rules.denyOut, 'denyOut'),
  };
}

export function sameEgress(a: EgressRules, b: EgressRules): boolean {
  const sameList = (x: string[], y: string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return (
    a.allowInternet === b.allowInternet && sameList(a.allowOut, b.allowOut) && sameList(a.denyOut, b.denyOut)
  );
}

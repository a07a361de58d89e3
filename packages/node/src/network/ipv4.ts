/**
 * IPv4 address and CIDR arithmetic on unsigned 32-bit numbers. Sandboxes get IPv4 only (their
 * interfaces have IPv6 disabled), so this is all the address maths the network layer needs.
 */

/** A network: `network` has no host bits set. */
export interface Cidr {
  readonly network: number;
  readonly prefix: number;
}

const OCTET = /^(0|[1-9][0-9]{0,2})$/;

/**
 * Strict dotted quad. Leading zeros are refused because some tools read them as octal, so
 * "010.0.0.1" would mean different hosts to different programs.
 */
export function parseIPv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!OCTET.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = value * 256 + octet;
  }
  return value;
}

export function formatIPv4(value: number): string {
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}

export function maskOf(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}

/**
 * "a.b.c.d" (a /32) or "a.b.c.d/n". Host bits are cleared ("10.1.2.3/8" is 10.0.0.0/8), the way
 * iptables and Go's net.ParseCIDR read it.
 */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const address = parseIPv4(slash < 0 ? text : text.slice(0, slash));
  if (address === undefined) return undefined;
  let prefix = 32;
  if (slash >= 0) {
    const prefixText = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]?)$/.test(prefixText)) return undefined;
    prefix = Number(prefixText);
    if (prefix > 32) return undefined;
  }
  return { network: (address & maskOf(prefix)) >>> 0, prefix };
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIPv4(cidr.network)}/${cidr.prefix}`;
}

export function cidrSize(cidr: Cidr): number {
  return 2 ** (32 - cidr.prefix);
}

export function cidrContainsAddress(cidr: Cidr, address: number): boolean {
  return (address & maskOf(cidr.prefix)) >>> 0 === cidr.network;
}

export function cidrContains(outer: Cidr, inner: Cidr): boolean {
  return outer.prefix <= inner.prefix && cidrContainsAddress(outer, inner.network);
}

export function cidrOverlaps(a: Cidr, b: Cidr): boolean {
  return cidrContains(a, b) || cidrContains(b, a);
}

import type { IptablesFlavour } from './config.js';

/** Parsers for the text output of ip and iptables. */

/** `ip netns list`: "name (id: 3)" or just "name", one per line. */
export function parseNetnsList(output: string): string[] {
  return output
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name.length > 0);
}

/** `ip -o link show`: "9: ae-n0-0@if2: <BROADCAST,...> ...". */
export function parseLinkNames(output: string): string[] {
  const names: string[] = [];
  for (const line of output.split('\n')) {
    const match = /^\d+:\s+([^:@\s]+)[@:]/.exec(line);
    if (match?.[1]) names.push(match[1]);
  }
  return names;
}

/** iptables >= 1.8 prints "(nf_tables)" or "(legacy)"; older releases are legacy only. */
export function parseIptablesFlavour(versionOutput: string): IptablesFlavour {
  return versionOutput.includes('nf_tables') ? 'nft' : 'legacy';
}

/**
 * IPv4 prefixes the machine already uses: each address of `ip -4 -o addr show` as a /32, and each
 * destination of `ip -4 route show` (first token, after an optional type such as "local").
 */
export function parseUsedPrefixes(
  addrOutput: string,
  routeOutput: string,
): { text: string; prefix: string }[] {
  const used: { text: string; prefix: string }[] = [];
  for (const line of addrOutput.split('\n')) {
    const match = /\sinet\s+(\d+\.\d+\.\d+\.\d+)/.exec(line);
    if (match?.[1]) used.push({ text: line.trim().replace(/\\\s*/g, ' '), prefix: `${match[1]}/32` });
  }
  const routeTypes = new Set([
    'unicast',
    'local',
    'broadcast',
    'multicast',
    'blackhole',
    'unreachable',
    'prohibit',
    'throw',
    'nat',
    'anycast',
  ]);
  for (const line of routeOutput.split('\n')) {
    const tokens = line.trim().split(/\s+/);
    const destination = routeTypes.has(tokens[0] ?? '') ? tokens[1] : tokens[0];
    if (destination && destination !== 'default' && /^\d/.test(destination)) {
      used.push({ text: line.trim(), prefix: destination });
    }
  }
  return used;
}

/**
 * Links of `ip -o link show` that are set up but not passing traffic yet: the kernel has not
 * activated them (qdisc still `noop`, which drops what is sent) or their carrier is not up.
 */
export function parseInactiveLinks(output: string): string[] {
  const inactive: string[] = [];
  for (const line of output.split('\n')) {
    const match = /^\d+:\s+([^:@\s]+)[@:][^<]*<([^>]*)>/.exec(line);
    if (!match?.[1] || !match[2]?.split(',').includes('UP')) continue;
    if (/\sqdisc noop\s/.test(line) || /\sstate (DOWN|LOWERLAYERDOWN)\s/.test(line)) inactive.push(match[1]);
  }
  return inactive;
}

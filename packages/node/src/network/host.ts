import { writeFile } from 'node:fs/promises';
import type { NetContext } from './context.js';
import { readIpForward } from './environment.js';
import { NetworkError } from './errors.js';
import { runCommand } from './exec.js';
import { cidrContains, formatCidr, parseCidr } from './ipv4.js';
import { chainNames, resourcePrefixes } from './naming.js';
import { parseLinkNames, parseNetnsList, parseUsedPrefixes } from './parse.js';
import { reclaimCommands, renderRestore, rootRules } from './rules.js';

/** The root network namespace's share of the work: shared chains, forwarding, leftovers. */

/** Errors `ip -force -batch` prints for things that are already gone: fine when tearing down. */
const ALREADY_GONE = /Cannot find device|No such file or directory|^Command failed/;

/** Runs `ip -force -batch -`, tolerating "already gone" failures so teardown is idempotent. */
export async function ipRemoveBatch(ctx: NetContext, lines: string[]): Promise<void> {
  if (lines.length === 0) return;
  const result = await runCommand(ctx.tools.ip, ['-force', '-batch', '-'], {
    input: `${lines.join('\n')}\n`,
    allowFailure: true,
  });
  const real = result.stderr
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !ALREADY_GONE.test(line));
  if (real.length > 0) {
    throw new NetworkError('COMMAND_FAILED', `ip -batch (${lines.join('; ')}): ${real.join('; ')}`);
  }
}

export async function listOwnNamespaces(ctx: NetContext): Promise<string[]> {
  const prefix = resourcePrefixes(ctx.config.nodeTag).namespace;
  const { stdout } = await runCommand(ctx.tools.ip, ['netns', 'list']);
  return parseNetnsList(stdout).filter((name) => name.startsWith(prefix));
}

export async function listOwnLinks(ctx: NetContext): Promise<string[]> {
  const prefix = resourcePrefixes(ctx.config.nodeTag).veth;
  const { stdout } = await runCommand(ctx.tools.ip, ['-o', 'link', 'show']);
  return parseLinkNames(stdout).filter((name) => name.startsWith(prefix));
}

async function removeOwnChains(ctx: NetContext): Promise<number> {
  const prefix = resourcePrefixes(ctx.config.nodeTag).chain;
  return ctx.iptablesQueue.run(async () => {
    let removed = 0;
    for (const table of ['filter', 'nat'] as const) {
      const save = (await runCommand(ctx.tools.iptablesSave, ['-t', table])).stdout;
      for (const args of reclaimCommands(table, save, prefix)) {
        await runCommand(ctx.tools.iptables, ['-w', ...args]);
        if (args[2] === '-X') removed++;
      }
    }
    return removed;
  });
}

export interface ReclaimReport {
  readonly namespaces: number;
  readonly links: number;
  readonly chains: number;
}

/**
 * Deletes every namespace, host-side veth and iptables chain carrying this node's tag: what a
 * crashed predecessor left, or what a failed teardown missed. Host-side veths go first: deleting
 * one destroys its pair at once, whereas a deleted namespace is cleaned up by the kernel
 * asynchronously (and not at all while a leftover process still holds it).
 */
export async function reclaim(ctx: NetContext): Promise<ReclaimReport> {
  const links = await listOwnLinks(ctx);
  await ipRemoveBatch(
    ctx,
    links.map((name) => `link del ${name}`),
  );
  const namespaces = await ctx.netnsQueue.run(async () => {
    const names = await listOwnNamespaces(ctx);
    await ipRemoveBatch(
      ctx,
      names.map((name) => `netns del ${name}`),
    );
    return names.length;
  });
  const chains = await removeOwnChains(ctx);
  return { namespaces, links: links.length, chains };
}

/**
 * Refuses a host range that addresses or routes on this machine already fall into (another node
 * process with the same range, a VPN, a container network): slots would steal or lose its traffic.
 * Broader routes (a 10.0.0.0/8 over a VPN) are fine: a slot's /31 is more specific.
 */
export async function checkRangeFree(ctx: NetContext): Promise<void> {
  const range = ctx.config.hostRangeCidr;
  const [addrs, routes] = await Promise.all([
    runCommand(ctx.tools.ip, ['-4', '-o', 'addr', 'show']),
    runCommand(ctx.tools.ip, ['-4', 'route', 'show', 'table', 'all']),
  ]);
  for (const used of parseUsedPrefixes(addrs.stdout, routes.stdout)) {
    const cidr = parseCidr(used.prefix);
    if (cidr && cidrContains(range, cidr)) {
      throw new NetworkError(
        'RANGE_IN_USE',
        `hostRange ${formatCidr(range)} is already used on this machine ("${used.text}"); ` +
          `give each node process its own range`,
      );
    }
  }
}

export async function installRootRules(ctx: NetContext): Promise<void> {
  const prefixes = resourcePrefixes(ctx.config.nodeTag);
  const text = renderRestore(
    rootRules({
      chains: chainNames(ctx.config.nodeTag),
      vethWildcard: prefixes.vethWildcard,
      hostRange: formatCidr(ctx.config.hostRangeCidr),
      alwaysDenied: ctx.config.alwaysDeniedCidrs,
    }),
  );
  await ctx.iptablesQueue.run(() =>
    runCommand(ctx.tools.iptablesRestore, ['-w', '--noflush'], { input: text }),
  );
}

const IP_FORWARD = '/proc/sys/net/ipv4/ip_forward';

/** Turns on IPv4 forwarding in the root namespace; returns true when it was off. */
export async function enableForwarding(): Promise<boolean> {
  if (await readIpForward()) return false;
  await writeFile(IP_FORWARD, '1\n');
  return true;
}

/**
 * Puts ip_forward back to 0 after we turned it on, unless any AgentENV namespace (of any node
 * process on this machine) still exists: another node still needs forwarding then. If something
 * else turned it on after us we cannot tell, which is why this only runs when we changed it.
 */
export async function restoreForwarding(ctx: NetContext): Promise<boolean> {
  const { stdout } = await runCommand(ctx.tools.ip, ['netns', 'list']);
  if (parseNetnsList(stdout).some((name) => name.startsWith('aenv-'))) return false;
  await writeFile(IP_FORWARD, '0\n');
  return true;
}

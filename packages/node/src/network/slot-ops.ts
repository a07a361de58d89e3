import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SLOT_LINK_PREFIX, type SlotAddresses } from './addressing.js';
import { netnsChange, type NetContext } from './context.js';
import { runCommand } from './exec.js';
import { formatCidr } from './ipv4.js';
import { ipRemoveBatch } from './host.js';
import {
  GATEWAY_MAC,
  ROUTER_GATEWAY,
  ROUTER_UPLINK,
  SANDBOX_INTERFACE,
  SANDBOX_MAC,
  type SlotNames,
} from './naming.js';
import { renderRestore, routerFilterTable, routerNatTable, type RouterRuleParams } from './rules.js';
import type { EgressRules } from './slot.js';

/**
 * One slot's namespaces, links and router rules:
 *
 *   root ns: ae-<tag>-<N> (rootSide/31) ── router ns aenv-<tag>-r<N>: up0 (hostAddress/31)
 *   router ns: gw0 (gateway/24)         ── sandbox ns aenv-<tag>-s<N>: eth0 (sandboxAddress/24)
 *
 * The sandbox namespace holds only lo and eth0 because runsc takes every interface that is up.
 * Filtering and NAT happen in the router namespace: runsc's netstack sends through a packet
 * socket on eth0, so netfilter in the sandbox namespace never sees the sandbox's traffic.
 */

export interface SlotSpec {
  readonly names: SlotNames;
  readonly addresses: SlotAddresses;
}

const lines = (l: string[]) => `${l.join('\n')}\n`;

function ipBatch(ctx: NetContext, commands: string[], netns?: string): Promise<unknown> {
  const args = netns ? ['-n', netns, '-batch', '-'] : ['-batch', '-'];
  return runCommand(ctx.tools.ip, args, { input: lines(commands) });
}

function routerParams(ctx: NetContext, spec: SlotSpec, egress: EgressRules): RouterRuleParams {
  return {
    hostAddress: spec.addresses.hostAddress,
    sandboxAddress: ctx.config.sandboxAddress,
    denied: [...ctx.config.alwaysDeniedCidrs, formatCidr(ctx.config.hostRangeCidr)],
    egress,
  };
}

/**
 * The sandbox interface's address and default route. runsc moves them into its netstack and
 * deletes them from the namespace, so this runs before every start or restore; `replace` makes it
 * idempotent.
 */
function sandboxInterfaceLines(ctx: NetContext): string[] {
  const { sandboxAddress, sandboxGateway, sandboxPrefixLength } = ctx.config;
  return [
    `addr replace ${sandboxAddress}/${sandboxPrefixLength} dev ${SANDBOX_INTERFACE}`,
    // runsc skips interfaces that are down, loopback included: it would then have no 127.0.0.1.
    'link set lo up',
    `link set ${SANDBOX_INTERFACE} up`,
    `route replace default via ${sandboxGateway} dev ${SANDBOX_INTERFACE}`,
  ];
}

/**
 * Builds a slot in two processes: one `ip -batch` for both namespaces, their links, sysctls and
 * firewall (it runs the in-namespace steps itself through `netns exec`), then the root-side
 * address. Each process the node spawns stops its event loop while the kernel copies the node's
 * page tables (tens of ms at a node's usual size), so spawns, not the commands, are what a burst
 * of slots (a fork's children) would otherwise queue on.
 */
export async function createSlotNetwork(ctx: NetContext, spec: SlotSpec, egress: EgressRules): Promise<void> {
  const { names, addresses } = spec;
  const { ip, sysctl, iptablesRestore } = ctx.tools;
  const dir = await mkdtemp(join(tmpdir(), `${names.routerNs}-`));
  try {
    const file = (name: string) => join(dir, name);
    const params = routerParams(ctx, spec, egress);
    await Promise.all([
      writeFile(file('router'), lines(routerLinkLines(ctx, spec))),
      writeFile(file('sandbox'), lines(sandboxInterfaceLines(ctx))),
      writeFile(file('rules'), renderRestore([routerFilterTable(params), routerNatTable(params)])),
    ]);
    // IPv6 off before any link exists, so no link gets a link-local address: sandboxes are
    // IPv4-only and the router must not forward or answer IPv6. The sandbox's lo keeps ::1 (only
    // "default", which new links inherit, is changed there) because programs inside bind to localhost.
    const batch = [
      `netns add ${names.routerNs}`,
      `netns add ${names.sandboxNs}`,
      `netns exec ${names.routerNs} ${sysctl} -q -w net.ipv4.ip_forward=1 net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1`,
      `netns exec ${names.sandboxNs} ${sysctl} -q -w net.ipv6.conf.default.disable_ipv6=1`,
      `link add ${names.hostVeth} type veth peer name ${ROUTER_UPLINK} netns ${names.routerNs}`,
      `netns exec ${names.routerNs} ${ip} -batch ${file('router')}`,
      `netns exec ${names.sandboxNs} ${ip} -batch ${file('sandbox')}`,
      // The file follows a wait time: `-w` alone would take the file name for one.
      `netns exec ${names.routerNs} ${iptablesRestore} -w 30 ${file('rules')}`,
    ];
    await netnsChange(ctx, true, () => ipBatch(ctx, batch));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await writeFile(`/proc/sys/net/ipv6/conf/${names.hostVeth}/disable_ipv6`, '1\n');
  await ipBatch(ctx, [
    `addr add ${addresses.rootSide}/${SLOT_LINK_PREFIX} dev ${names.hostVeth}`,
    `link set ${names.hostVeth} up`,
  ]);
}

/** The router namespace's links, addresses and route, and the sandbox's end of its link. */
function routerLinkLines(ctx: NetContext, { names, addresses }: SlotSpec): string[] {
  const { sandboxGateway, sandboxPrefixLength } = ctx.config;
  return [
    `link add ${ROUTER_GATEWAY} address ${GATEWAY_MAC} type veth peer name ${SANDBOX_INTERFACE} address ${SANDBOX_MAC} netns ${names.sandboxNs}`,
    `addr add ${addresses.hostAddress}/${SLOT_LINK_PREFIX} dev ${ROUTER_UPLINK}`,
    `addr add ${sandboxGateway}/${sandboxPrefixLength} dev ${ROUTER_GATEWAY}`,
    'link set lo up',
    `link set ${ROUTER_UPLINK} up`,
    `link set ${ROUTER_GATEWAY} up`,
    `route add default via ${addresses.rootSide} dev ${ROUTER_UPLINK}`,
  ];
}

function restoreInRouter(ctx: NetContext, routerNs: string, rules: string): Promise<unknown> {
  return ctx.iptablesQueue.run(() =>
    runCommand(ctx.tools.ip, ['netns', 'exec', routerNs, ctx.tools.iptablesRestore, '-w'], { input: rules }),
  );
}

/** Replaces the router's whole filter table in one iptables-restore transaction. */
export function applyEgress(ctx: NetContext, spec: SlotSpec, egress: EgressRules): Promise<unknown> {
  return restoreInRouter(
    ctx,
    spec.names.routerNs,
    renderRestore([routerFilterTable(routerParams(ctx, spec, egress))]),
  );
}

export function resetSandboxInterface(ctx: NetContext, spec: SlotSpec): Promise<unknown> {
  return ipBatch(ctx, sandboxInterfaceLines(ctx), spec.names.sandboxNs);
}

/**
 * Idempotent: also cleans up after a half-finished create. The host-side veth goes first because
 * deleting it destroys its pair synchronously, so the index (and the name) can be reused at once.
 */
export async function destroySlotNetwork(ctx: NetContext, spec: SlotSpec): Promise<void> {
  const { names } = spec;
  await ipRemoveBatch(ctx, [`link del ${names.hostVeth}`]);
  await netnsChange(ctx, false, () =>
    ipRemoveBatch(ctx, [`netns del ${names.routerNs}`, `netns del ${names.sandboxNs}`]),
  );
}

import { writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { SLOT_LINK_PREFIX, type SlotAddresses } from './addressing.js';
import type { NetContext } from './context.js';
import { NetworkError } from './errors.js';
import { runCommand } from './exec.js';
import { formatCidr } from './ipv4.js';
import { ipRemoveBatch } from './host.js';
import { parseInactiveLinks } from './parse.js';
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

function ipBatch(ctx: NetContext, lines: string[], netns?: string): Promise<unknown> {
  const args = netns ? ['-n', netns, '-batch', '-'] : ['-batch', '-'];
  return runCommand(ctx.tools.ip, args, { input: `${lines.join('\n')}\n` });
}

function sysctlIn(ctx: NetContext, netns: string, settings: string[]): Promise<unknown> {
  return runCommand(ctx.tools.ip, ['netns', 'exec', netns, ctx.tools.sysctl, '-q', '-w', ...settings]);
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

export async function createSlotNetwork(ctx: NetContext, spec: SlotSpec, egress: EgressRules): Promise<void> {
  const { names, addresses } = spec;
  const { sandboxGateway, sandboxPrefixLength } = ctx.config;
  await ctx.netnsQueue.run(() =>
    ipBatch(ctx, [`netns add ${names.routerNs}`, `netns add ${names.sandboxNs}`]),
  );
  // IPv6 off before any link exists, so no link gets a link-local address: sandboxes are IPv4-only
  // and the router must not forward or answer IPv6. The sandbox's lo keeps ::1 (only "default",
  // which new links inherit, is changed there) because programs inside bind to localhost.
  await Promise.all([
    sysctlIn(ctx, names.routerNs, [
      'net.ipv4.ip_forward=1',
      'net.ipv6.conf.all.disable_ipv6=1',
      'net.ipv6.conf.default.disable_ipv6=1',
    ]),
    sysctlIn(ctx, names.sandboxNs, ['net.ipv6.conf.default.disable_ipv6=1']),
  ]);
  const params = routerParams(ctx, spec, egress);
  // Independent steps overlap (each is a process spawn of a few ms); nothing runs in the slot
  // before it is handed out, so the firewall may land after the links.
  const firewall = restoreInRouter(
    ctx,
    names.routerNs,
    renderRestore([routerFilterTable(params), routerNatTable(params)]),
  );
  const links = (async () => {
    await runCommand(ctx.tools.ip, [
      'link',
      'add',
      names.hostVeth,
      'type',
      'veth',
      'peer',
      'name',
      ROUTER_UPLINK,
      'netns',
      names.routerNs,
    ]);
    const rootSide = (async () => {
      await writeFile(`/proc/sys/net/ipv6/conf/${names.hostVeth}/disable_ipv6`, '1\n');
      await ipBatch(ctx, [
        `addr add ${addresses.rootSide}/${SLOT_LINK_PREFIX} dev ${names.hostVeth}`,
        `link set ${names.hostVeth} up`,
      ]);
    })();
    const inside = (async () => {
      await ipBatch(
        ctx,
        [
          `link add ${ROUTER_GATEWAY} address ${GATEWAY_MAC} type veth peer name ${SANDBOX_INTERFACE} address ${SANDBOX_MAC} netns ${names.sandboxNs}`,
          `addr add ${addresses.hostAddress}/${SLOT_LINK_PREFIX} dev ${ROUTER_UPLINK}`,
          `addr add ${sandboxGateway}/${sandboxPrefixLength} dev ${ROUTER_GATEWAY}`,
          'link set lo up',
          `link set ${ROUTER_UPLINK} up`,
          `link set ${ROUTER_GATEWAY} up`,
          `route add default via ${addresses.rootSide} dev ${ROUTER_UPLINK}`,
        ],
        names.routerNs,
      );
      await ipBatch(ctx, sandboxInterfaceLines(ctx), names.sandboxNs);
    })();
    await settleAll([rootSide, inside]);
  })();
  await settleAll([firewall, links]);
  await untilLinksActive(ctx, names);
}

/** How long a new slot's links may take to become active, and how often that is looked at. */
const LINK_ACTIVE_TIMEOUT_MS = 10_000;
const LINK_ACTIVE_POLL_MS = 10;

/**
 * Waits until the kernel has activated every link of the slot. Until its link watcher has run for
 * a link that was set up, the link's qdisc is `noop` and drops what is sent: the sandbox's first
 * ARP request is lost, and its first connection waits for the ARP retry a second later. The
 * watcher needs the RTNL lock, which the teardown of deleted namespaces holds for long stretches,
 * so on a node that just released slots `link set up` can return well before that.
 */
async function untilLinksActive(ctx: NetContext, names: SlotNames): Promise<void> {
  const show = (netns?: string) =>
    runCommand(ctx.tools.ip, [
      ...(netns ? ['-n', netns] : []),
      '-o',
      'link',
      'show',
      ...(netns ? [] : ['dev', names.hostVeth]),
    ]);
  const deadline = Date.now() + LINK_ACTIVE_TIMEOUT_MS;
  for (;;) {
    const outputs = await Promise.all([show(), show(names.routerNs), show(names.sandboxNs)]);
    const inactive = parseInactiveLinks(outputs.map((o) => o.stdout).join('\n'));
    if (inactive.length === 0) return;
    if (Date.now() > deadline)
      throw new NetworkError(
        'COMMAND_FAILED',
        `the links of ${names.sandboxNs} (${inactive.join(', ')}) were not active ${LINK_ACTIVE_TIMEOUT_MS} ms after they were set up`,
      );
    await sleep(LINK_ACTIVE_POLL_MS);
  }
}

/** Like Promise.all, but waits for every step before failing, so cleanup never races a step. */
async function settleAll(steps: Promise<unknown>[]): Promise<void> {
  const results = await Promise.allSettled(steps);
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) throw failed.reason;
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
 * Makes a slot whose sandbox is gone as good as a new one, for the next sandbox: the router
 * forgets the old sandbox's connections (a late reply to one would otherwise still be forwarded
 * to whatever listens at the sandbox address next), the firewall goes back to `egress`, and the
 * sandbox interface gets back what runsc took from it. A fraction of a rebuild's process spawns,
 * and no namespace is created or torn down (their teardown holds the kernel's RTNL lock).
 */
export async function recycleSlotNetwork(
  ctx: NetContext,
  spec: SlotSpec,
  conntrack: string,
  egress: EgressRules | null,
): Promise<void> {
  await settleAll([
    runCommand(ctx.tools.ip, ['netns', 'exec', spec.names.routerNs, conntrack, '-F']),
    egress ? applyEgress(ctx, spec, egress) : Promise.resolve(),
    resetSandboxInterface(ctx, spec),
  ]);
}

/**
 * Idempotent: also cleans up after a half-finished create. The host-side veth goes first because
 * deleting it destroys its pair synchronously, so the index (and the name) can be reused at once.
 */
export async function destroySlotNetwork(ctx: NetContext, spec: SlotSpec): Promise<void> {
  const { names } = spec;
  await ipRemoveBatch(ctx, [`link del ${names.hostVeth}`]);
  await ctx.netnsQueue.run(() =>
    ipRemoveBatch(ctx, [`netns del ${names.routerNs}`, `netns del ${names.sandboxNs}`]),
  );
}

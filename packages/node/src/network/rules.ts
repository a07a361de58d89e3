import { ROUTER_GATEWAY, ROUTER_UPLINK, type ChainNames } from './naming.js';
import type { EgressRules } from './slot.js';

/**
 * Firewall rules as data. Everything is rendered for iptables-restore, which applies a whole table
 * in one transaction: a slot's egress policy is never half-replaced, and a slot costs one process
 * spawn instead of one per rule.
 */

export type Rule = readonly string[];

export interface TableBlock {
  readonly table: 'filter' | 'nat';
  /** Chains to declare: built-in ones with a policy, user chains with '-'. */
  readonly chains: readonly { readonly name: string; readonly policy: 'ACCEPT' | 'DROP' | '-' }[];
  /** Rule lines without the table, e.g. ['-A', 'FORWARD', '-j', 'ACCEPT']. */
  readonly rules: readonly Rule[];
}

/** Arguments never contain whitespace (they are addresses, names and flags we generate). */
export function renderRestore(blocks: readonly TableBlock[]): string {
  const lines: string[] = [];
  for (const block of blocks) {
    lines.push(`*${block.table}`);
    for (const chain of block.chains) lines.push(`:${chain.name} ${chain.policy} [0:0]`);
    for (const rule of block.rules) lines.push(rule.join(' '));
    lines.push('COMMIT');
  }
  return `${lines.join('\n')}\n`;
}

const REJECT = ['-j', 'REJECT', '--reject-with', 'icmp-admin-prohibited'];

export interface RootRuleParams {
  readonly chains: ChainNames;
  /** Matches every host-side veth of this node, e.g. "ae-n0-+". */
  readonly vethWildcard: string;
  readonly hostRange: string;
  readonly alwaysDenied: readonly string[];
}

/**
 * The root namespace's share: forward slot traffic to the uplink (masqueraded), never from one
 * slot to another, never into a slot unless the host opened the connection, and no host INPUT from
 * any slot except replies. The router namespaces already enforce most of this; repeating it here
 * keeps the host safe even if a router's rules were wrong or missing, and only this layer knows
 * the host's own addresses (uplink, other links) that a sandbox could otherwise dial. What a slot
 * sends is rejected (it fails fast; the sandbox learns nothing it did not know); unsolicited
 * traffic into a slot from elsewhere is dropped silently. Applied with --noflush: each chain is
 * jumped to from the top of its built-in chain, so a DROP policy elsewhere (Docker) does not
 * swallow sandbox traffic, and other software's rules are left alone.
 */
export function rootRules(p: RootRuleParams): TableBlock[] {
  const slot = p.vethWildcard;
  const forward = p.chains.forward;
  const input = p.chains.input;
  const nat = p.chains.postrouting;
  return [
    {
      table: 'filter',
      chains: [
        { name: forward, policy: '-' },
        { name: input, policy: '-' },
      ],
      rules: [
        ['-A', forward, '-i', slot, '-o', slot, ...REJECT],
        ['-A', forward, '-o', slot, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
        ['-A', forward, '-o', slot, '-j', 'DROP'],
        ...[...p.alwaysDenied, p.hostRange].map((cidr) => ['-A', forward, '-i', slot, '-d', cidr, ...REJECT]),
        ['-A', forward, '-i', slot, '-j', 'ACCEPT'],
        ['-A', input, '-i', slot, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
        ['-A', input, '-i', slot, ...REJECT],
        ['-I', 'FORWARD', '1', '-j', forward],
        ['-I', 'INPUT', '1', '-j', input],
      ],
    },
    {
      table: 'nat',
      chains: [{ name: nat, policy: '-' }],
      rules: [
        ['-A', nat, '-s', p.hostRange, '!', '-o', slot, '-j', 'MASQUERADE'],
        ['-I', 'POSTROUTING', '1', '-j', nat],
      ],
    },
  ];
}

export interface RouterRuleParams {
  readonly hostAddress: string;
  readonly sandboxAddress: string;
  /** Always-denied ranges plus the node's host range (other slots, the root-side gateway). */
  readonly denied: readonly string[];
  readonly egress: EgressRules;
}

const EGRESS = 'EGRESS';

/**
 * A router namespace's filter table. Replies (conntrack REPLY direction) pass first, so connections
 * the node opens into the sandbox always work. Every packet the sandbox originates, not only the
 * first of a connection, goes through EGRESS, so tightening the rules at run time also cuts
 * connections that are already open. Deny beats allow: always-denied, then denyOut, then allowOut,
 * then the internet default. REJECT (not DROP) makes a blocked connect fail at once instead of
 * hanging the agent until its timeout.
 */
export function routerFilterTable(p: RouterRuleParams): TableBlock {
  const sandbox = `${p.sandboxAddress}/32`;
  return {
    table: 'filter',
    chains: [
      { name: 'INPUT', policy: 'DROP' },
      { name: 'FORWARD', policy: 'DROP' },
      { name: 'OUTPUT', policy: 'ACCEPT' },
      { name: EGRESS, policy: '-' },
    ],
    rules: [
      ['-A', 'INPUT', '-i', 'lo', '-j', 'ACCEPT'],
      [
        '-A',
        'FORWARD',
        '-m',
        'conntrack',
        '--ctstate',
        'RELATED,ESTABLISHED',
        '--ctdir',
        'REPLY',
        '-j',
        'ACCEPT',
      ],
      [
        '-A',
        'FORWARD',
        '-i',
        ROUTER_UPLINK,
        '-o',
        ROUTER_GATEWAY,
        '-d',
        sandbox,
        '-m',
        'conntrack',
        '--ctstate',
        'DNAT',
        '--ctdir',
        'ORIGINAL',
        '-j',
        'ACCEPT',
      ],
      ['-A', 'FORWARD', '-i', ROUTER_GATEWAY, '-o', ROUTER_UPLINK, '-s', sandbox, '-j', EGRESS],
      ...p.denied.map((cidr) => ['-A', EGRESS, '-d', cidr, ...REJECT]),
      ...p.egress.denyOut.map((cidr) => ['-A', EGRESS, '-d', cidr, ...REJECT]),
      ...p.egress.allowOut.map((cidr) => ['-A', EGRESS, '-d', cidr, '-j', 'ACCEPT']),
      p.egress.allowInternet ? ['-A', EGRESS, '-j', 'ACCEPT'] : ['-A', EGRESS, ...REJECT],
    ],
  };
}

/**
 * A router namespace's nat table: hostAddress:P → sandboxAddress:P for the node, and the sandbox's
 * traffic leaves as hostAddress (the root namespace then masquerades it again to the uplink).
 */
export function routerNatTable(p: RouterRuleParams): TableBlock {
  const sandbox = `${p.sandboxAddress}/32`;
  return {
    table: 'nat',
    chains: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'].map((name) => ({
      name,
      policy: 'ACCEPT' as const,
    })),
    rules: [
      [
        '-A',
        'PREROUTING',
        '-i',
        ROUTER_UPLINK,
        '-d',
        `${p.hostAddress}/32`,
        '-j',
        'DNAT',
        '--to-destination',
        p.sandboxAddress,
      ],
      ['-A', 'POSTROUTING', '-o', ROUTER_UPLINK, '-s', sandbox, '-j', 'SNAT', '--to-source', p.hostAddress],
    ],
  };
}

/**
 * Commands (iptables arguments after the binary) that remove every chain of ours found in an
 * `iptables-save -t <table>` dump, and the jumps to them from other chains: how a restarted node
 * clears what its crashed predecessor left. Jumps go first; a chain still referenced cannot be
 * deleted.
 */
export function reclaimCommands(table: 'filter' | 'nat', save: string, chainPrefix: string): string[][] {
  const jumps: string[][] = [];
  const chains: string[] = [];
  for (const line of save.split('\n')) {
    if (line.startsWith(`:${chainPrefix}`)) {
      chains.push(line.slice(1).split(' ')[0] ?? '');
      continue;
    }
    if (!line.startsWith('-A ')) continue;
    const tokens = line.trim().split(/\s+/);
    const owner = tokens[1] ?? '';
    if (owner.startsWith(chainPrefix)) continue;
    const target = tokens.findIndex(
      (t, i) => (t === '-j' || t === '-g') && tokens[i + 1]?.startsWith(chainPrefix),
    );
    if (target >= 0) jumps.push(['-t', table, '-D', ...tokens.slice(1)]);
  }
  return [
    ...jumps,
    ...chains.map((chain) => ['-t', table, '-F', chain]),
    ...chains.map((chain) => ['-t', table, '-X', chain]),
  ];
}

import { access, readFile } from 'node:fs/promises';
import type { IptablesFlavour } from './config.js';
import { NetworkError } from './errors.js';
import { findBinary, runCommand } from './exec.js';
import { parseIptablesFlavour } from './parse.js';

/** Absolute paths of the programs the network layer runs. */
export interface NetTools {
  readonly ip: string;
  readonly iptables: string;
  readonly iptablesRestore: string;
  readonly iptablesSave: string;
  readonly sysctl: string;
  /** Absent on a host without conntrack-tools: released slots are then torn down, not reused. */
  readonly conntrack: string | null;
  readonly flavour: IptablesFlavour;
}

/** What the machine looks like, detected at start (RUNTIME.md lists what differs between hosts). */
export interface NetworkEnvironment {
  readonly iptablesFlavour: IptablesFlavour;
  /** net.ipv4.ip_forward before this node touched it. */
  readonly ipForwardWasEnabled: boolean;
  /**
   * Informational only: br_netfilter makes bridged traffic traverse iptables, which matters for
   * bridge-based topologies. Slots use routed veth pairs and no bridge, so it changes nothing here.
   */
  readonly brNetfilterLoaded: boolean;
  /** See needsProcSysNetWorkaround(). */
  readonly procSysNetWorkaround: boolean;
  /** Things that work but that an operator should know about. */
  readonly warnings: string[];
}

export function requireRoot(): void {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    throw new NetworkError('NOT_ROOT', 'sandbox networking needs root (network namespaces, veths, iptables)');
  }
}

/**
 * 'auto' runs the plain `iptables` (whatever update-alternatives selected), because that is the
 * flavour the rest of the machine (Docker, firewalld, ...) uses too; rules in the other flavour
 * would be evaluated separately and could not override their DROP policies.
 */
export async function resolveTools(choice: 'auto' | IptablesFlavour): Promise<NetTools> {
  const suffix = choice === 'auto' ? '' : `-${choice}`;
  const [ip, iptables, iptablesRestore, iptablesSave, sysctl, conntrack] = await Promise.all([
    findBinary('ip'),
    findBinary(`iptables${suffix}`),
    findBinary(`iptables${suffix}-restore`),
    findBinary(`iptables${suffix}-save`),
    findBinary('sysctl'),
    findBinary('conntrack').catch(() => null),
  ]);
  const flavour =
    choice === 'auto' ? parseIptablesFlavour((await runCommand(iptables, ['--version'])).stdout) : choice;
  return { ip, iptables, iptablesRestore, iptablesSave, sysctl, conntrack, flavour };
}

let workaround: Promise<boolean> | undefined;

/**
 * True when runsc's `--network=sandbox` would refuse to start ("cannot run with network enabled in
 * root network namespace"). runsc decides it is in the root network namespace when
 * /proc/sys/net/core/rmem_default exists, which older kernels expose in the initial namespace only;
 * newer ones (6.x here) expose it in every namespace. We ask the same question runsc asks, from a
 * fresh non-root namespace. When true, the runtime starts runsc inside
 * `unshare -m --propagation private` with a tmpfs mounted over /proc/sys/net. Cached: the answer
 * depends on the kernel only.
 */
export function needsProcSysNetWorkaround(): Promise<boolean> {
  workaround ??= (async () => {
    const unshare = await findBinary('unshare');
    const probe = await runCommand(
      unshare,
      ['--net', '--', 'test', '-e', '/proc/sys/net/core/rmem_default'],
      {
        allowFailure: true,
      },
    );
    if (probe.code === 0) return true;
    if (probe.code === 1) return false;
    throw new NetworkError(
      'COMMAND_FAILED',
      `could not probe /proc/sys/net in a new network namespace: ${probe.stderr.trim() || `exit ${probe.code}`}`,
    );
  })();
  workaround.catch(() => {
    workaround = undefined;
  });
  return workaround;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

export async function readIpForward(): Promise<boolean> {
  return (await readFile('/proc/sys/net/ipv4/ip_forward', 'utf8')).trim() === '1';
}

/** Rules loaded in the iptables flavour we do not use (e.g. Docker on legacy while we use nft). */
async function otherFlavourHasRules(flavour: IptablesFlavour): Promise<string | undefined> {
  const other = flavour === 'nft' ? 'legacy' : 'nft';
  let save: string;
  try {
    save = await findBinary(`iptables-${other}-save`);
  } catch {
    return undefined;
  }
  const dump = await runCommand(save, [], { allowFailure: true });
  return /^-A /m.test(dump.stdout) ? other : undefined;
}

export async function detectEnvironment(tools: NetTools): Promise<NetworkEnvironment> {
  const [ipForwardWasEnabled, brNetfilterLoaded, procSysNetWorkaround, other] = await Promise.all([
    readIpForward(),
    exists('/proc/sys/net/bridge/bridge-nf-call-iptables'),
    needsProcSysNetWorkaround(),
    otherFlavourHasRules(tools.flavour),
  ]);
  const warnings: string[] = [];
  if (other) {
    warnings.push(
      `iptables-${other} also has rules loaded while AgentENV uses iptables-${tools.flavour}; both are ` +
        `evaluated, so a DROP there (e.g. a FORWARD policy) still blocks sandbox traffic`,
    );
  }
  return {
    iptablesFlavour: tools.flavour,
    ipForwardWasEnabled,
    brNetfilterLoaded,
    procSysNetWorkaround,
    warnings,
  };
}

import type { ResolvedNetworkConfig } from './config.js';
import type { NetTools } from './environment.js';
import { Limiter } from '../util/index.js';

/** Minimal structured logger; a pino logger fits. */
export interface NetworkLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export const consoleWarnLogger: NetworkLogger = {
  info: () => undefined,
  warn: (fields, message) => console.warn(`[network] ${message}`, fields),
};

/** What the I/O modules share: configuration, resolved programs and the serialisation queues. */
export interface NetContext {
  readonly config: ResolvedNetworkConfig;
  readonly tools: NetTools;
  readonly logger: NetworkLogger;
  /**
   * Every iptables call, one at a time. Legacy iptables shares one lock file across all network
   * namespaces (`-w` waits for it, but a queue in-process is cheaper than contended retries);
   * nft-based iptables can fail a concurrent read-modify-write of the same table; and our
   * reclaim/install sequences in the root namespace must not interleave.
   */
  readonly iptablesQueue: Limiter;
  /**
   * `ip netns add/del` one at a time until one has succeeded: the first `add` turns /run/netns
   * into a shared mount, and concurrent first calls can stack several mounts there. Later ones
   * run in parallel (see netnsChange).
   */
  readonly netnsQueue: Limiter;
  /** Set once an `ip netns` change has succeeded in this process: /run/netns is mounted then. */
  netnsMounted: boolean;
}

/**
 * Runs an `ip netns add/del` step: in netnsQueue until /run/netns is mounted, then at once.
 * `adds`: the step creates a namespace, so its success means the mount is there.
 */
export async function netnsChange<T>(ctx: NetContext, adds: boolean, step: () => Promise<T>): Promise<T> {
  if (ctx.netnsMounted) return step();
  return ctx.netnsQueue.run(async () => {
    const result = await step();
    if (adds) ctx.netnsMounted = true;
    return result;
  });
}

export function createContext(
  config: ResolvedNetworkConfig,
  tools: NetTools,
  logger: NetworkLogger,
): NetContext {
  return {
    config,
    tools,
    logger,
    iptablesQueue: new Limiter(1),
    netnsQueue: new Limiter(1),
    netnsMounted: false,
  };
}

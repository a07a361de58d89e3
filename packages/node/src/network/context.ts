import type { ResolvedNetworkConfig } from './config.js';
import type { NetTools } from './environment.js';
import { Limiter } from '@agentenv/common';

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
   * `ip netns add/del` one at a time: the first `add` turns /run/netns into a shared mount, and
   * concurrent first calls can stack several mounts there.
   */
  readonly netnsQueue: Limiter;
}

export function createContext(
  config: ResolvedNetworkConfig,
  tools: NetTools,
  logger: NetworkLogger,
): NetContext {
  return { config, tools, logger, iptablesQueue: new Limiter(1), netnsQueue: new Limiter(1) };
}

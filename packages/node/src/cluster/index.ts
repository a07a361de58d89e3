// The node's side of a cluster: the scheduler agent, and the per-sandbox lifecycle events.
import type { Logger } from 'pino';
import { createSchedulerClient } from '@agentenv/scheduler';
import { ClusterAgent } from './agent.js';
import { CacheKeys, type CacheSource, type RecordSource } from './cache-keys.js';
import { hostStats } from './host-stats.js';
import type { RosterSource } from './report.js';
import type { SandboxEventLog } from './sandbox-events.js';

export { ClusterAgent } from './agent.js';
export { SandboxEventLog, type SandboxEvent } from './sandbox-events.js';

export interface ClusterJoinOptions {
  schedulerUrl: string;
  apiKey: string;
  nodeId: string;
  clusterId: string;
  advertiseUrl: string;
  version: string;
  limits: { maxSandboxes: number; maxConcurrentStarts: number };
  records: () => readonly RosterSource[];
  cache: CacheSource;
  repository: RecordSource;
  events: SandboxEventLog;
  /** The orchestrator's finished stages (see ClusterAgentDeps). */
  stages?: (listener: (stage: string) => void) => () => void;
  /** Stops a sandbox the cluster declared lost (see ClusterAgentDeps). */
  fence: (sandboxId: string) => Promise<void>;
  logger: Logger;
  /** With P2P on: the endpoint and chunks to advertise. */
  p2p?: {
    endpointId: string;
    addresses: readonly string[];
    chunkKeys(limit: number): Promise<string[]>;
  } | null;
}

/** Chunk keys per heartbeat: what the scheduler indexes per node. */
const CHUNK_KEYS = 4096;

/** The agent of a node that joins the cluster behind `schedulerUrl` (started by the caller). */
export function clusterAgent(o: ClusterJoinOptions): ClusterAgent {
  const keys = new CacheKeys(o.cache, o.repository);
  const p2p = o.p2p;
  return new ClusterAgent({
    client: createSchedulerClient({ url: o.schedulerUrl, apiKey: o.apiKey }),
    identity: { nodeId: o.nodeId, clusterId: o.clusterId, advertiseUrl: o.advertiseUrl, version: o.version },
    limits: o.limits,
    records: o.records,
    host: hostStats,
    cacheKeys: () => keys.current(),
    ...(p2p && {
      p2p: async () => ({
        endpointId: p2p.endpointId,
        addresses: [...p2p.addresses],
        chunkKeys: await p2p.chunkKeys(CHUNK_KEYS),
      }),
    }),
    events: o.events,
    ...(o.stages && { stages: o.stages }),
    fence: o.fence,
    logger: o.logger.child({ component: 'cluster' }),
  });
}

import { freemem, totalmem, cpus, loadavg } from 'node:os';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { notFound } from '@agentenv/common';
import { PUBLIC_ROUTE } from '../auth.js';
import type { NodeConfig } from '../../config/index.js';
import type { NodeMetrics } from '../../metrics/index.js';
import type { Orchestrator } from '../../orchestrator/index.js';

export interface SystemRoutesOptions {
  orchestrator: Orchestrator;
  metrics: NodeMetrics;
  config: NodeConfig;
  version: string;
}

export const systemRoutes: FastifyPluginAsyncTypebox<SystemRoutesOptions> = async (app, opts) => {
  app.get('/health', { schema: { hide: true }, config: PUBLIC_ROUTE }, async (_req, reply) =>
    reply.status(204).send(),
  );

  app.get('/metrics', { schema: { hide: true }, config: PUBLIC_ROUTE }, async (_req, reply) =>
    reply.type(opts.metrics.registry.contentType).send(await opts.metrics.registry.metrics()),
  );

  const nodeStatus = () => nodeStatusBody(opts);
  app.get('/nodes', async () => [nodeStatus()]);
  app.get('/nodes/:nodeID', { schema: { params: Type.Object({ nodeID: Type.String() }) } }, async (req) => {
    if (req.params.nodeID !== opts.config.nodeIdentity.nodeId)
      throw notFound(`node ${req.params.nodeID} not found`);
    return nodeStatus();
  });
};

/** GET /nodes/{id}: this node's status, counts and what it has allocated and uses. */
export function nodeStatusBody(opts: Omit<SystemRoutesOptions, 'metrics'>) {
  const counts = opts.orchestrator.counts();
  const records = opts.orchestrator.list();
  const alloc = records.filter((r) => r.state !== 'paused');
  const memory = opts.orchestrator.memoryFigures();
  const mib = (bytes: number | undefined) =>
    bytes === undefined || !Number.isFinite(bytes) ? null : Math.round(bytes / 2 ** 20);
  return {
    nodeID: opts.config.nodeIdentity.nodeId,
    clusterID: opts.config.nodeIdentity.clusterId,
    status: opts.orchestrator.isShuttingDown ? 'draining' : 'ready',
    version: opts.version,
    sandboxCount: counts.running,
    startingSandboxCount: counts.creating + counts.resuming,
    pausedSandboxCount: counts.paused,
    allocatedCPU: alloc.reduce((a, r) => a + r.cpuCount, 0),
    allocatedMemoryMiB: alloc.reduce((a, r) => a + r.memoryMB, 0),
    cpuCount: cpus().length,
    cpuLoad1m: loadavg()[0],
    memoryTotalMiB: Math.round(totalmem() / 2 ** 20),
    memoryUsedMiB: Math.round((totalmem() - freemem()) / 2 ** 20),
    // Sandboxes' memory as admission counts it (null when the node does not measure it).
    memoryNominalMiB: mib(memory?.nominal),
    memoryMeasuredMiB: mib(memory?.measured),
    memoryFreeMiB: mib(memory?.free),
    memoryLimitMiB: mib(memory?.limit),
  };
}

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { DomainError, invalid } from '@agentenv/common';
import { validateEgressRules as validateEgress } from '../../network/index.js';
import { visibleState, type CreateSandboxInput, type Orchestrator } from '../../orchestrator/index.js';
import { matchesMetadata, paginate, parseMetadataFilter } from '../pagination.js';
import {
  CreateSandboxBody,
  ListQuery,
  MetricsQuery,
  NetworkUpdateBody,
  OptionalTimeoutBody,
  RefreshBody,
  SandboxParams,
  TimeoutBody,
} from '../schemas.js';
import { detailBody, listedBody, sandboxBody } from '../serialize.js';

export interface SandboxRoutesOptions {
  orchestrator: Orchestrator;
  defaultTimeoutSecs: number;
  /** Returned as `domain` so SDKs can build `{port}-{id}.{domain}` hosts; null when none. */
  domain: string | undefined;
}

/** A create request's settings, everything but the template (shared with /sandboxes-cold). */
export function createInput(
  body: Static<typeof CreateSandboxBody>,
  alwaysSecure: boolean,
  defaultTimeoutSecs: number,
): Omit<CreateSandboxInput, 'source'> {
  if (body.timeout === 0) throw invalid('timeout must be at least 1 second');
  const egress = validateEgress({
    allowInternet: body.allow_internet_access ?? true,
    allowOut: body.network?.allowOut ?? [],
    denyOut: body.network?.denyOut ?? [],
  });
  return {
    timeoutSecs: body.timeout ?? defaultTimeoutSecs,
    metadata: body.metadata ?? {},
    envVars: body.envVars ?? {},
    autoPause: body.autoPause ?? true,
    autoResume: body.autoResume?.enabled ?? false,
    secure: alwaysSecure || (body.secure ?? false),
    egress,
    allowPublicTraffic: body.network?.allowPublicTraffic ?? true,
  };
}

/** E2B's sandbox endpoints (E2B-COMPAT.md §2). */
export const sandboxRoutes: FastifyPluginAsyncTypebox<SandboxRoutesOptions> = async (app, opts) => {
  const { orchestrator: orch, domain } = opts;

  // v2 creates are always secured (the SDK marks `secure` deprecated and ignores it); v1 asks.
  const create = async (body: Static<typeof CreateSandboxBody>, alwaysSecure: boolean) =>
    orch.create({
      ...createInput(body, alwaysSecure, opts.defaultTimeoutSecs),
      source: { kind: 'named', name: body.templateID ?? 'base' },
    });
  for (const url of ['/sandboxes', '/v2/sandboxes']) {
    app.post(url, { schema: { body: CreateSandboxBody } }, async (req, reply) => {
      const rec = await create(req.body, url.startsWith('/v2/'));
      return reply.status(201).header('x-agentenv-sandbox-id', rec.sandboxId).send(sandboxBody(rec, domain));
    });
  }

  app.get('/sandboxes', async () =>
    orch
      .list()
      .filter((r) => visibleState(r.state) === 'running')
      .map(listedBody),
  );

  app.get('/v2/sandboxes', { schema: { querystring: ListQuery } }, async (req, reply) => {
    const states = new Set(req.query.state ? req.query.state.split(',') : ['running', 'paused']);
    const filter = parseMetadataFilter(req.query.metadata);
    const all = orch
      .list()
      .filter((r) => states.has(visibleState(r.state)) && matchesMetadata(r.metadata, filter))
      .map(listedBody);
    const { page, next } = paginate(all, req.query.limit ?? 100, req.query.nextToken);
    if (next) void reply.header('x-next-token', next);
    return page;
  });

  app.get('/sandboxes/:sandboxID', { schema: { params: SandboxParams } }, async (req) =>
    detailBody(orch.get(req.params.sandboxID), domain),
  );

  app.delete('/sandboxes/:sandboxID', { schema: { params: SandboxParams } }, async (req, reply) => {
    await orch.kill(req.params.sandboxID);
    return reply.status(204).send();
  });

  app.post(
    '/sandboxes/:sandboxID/timeout',
    { schema: { params: SandboxParams, body: TimeoutBody } },
    async (req, reply) => {
      if (req.body.timeout === 0) throw invalid('timeout must be at least 1 second');
      await orch.setTimeout(req.params.sandboxID, req.body.timeout);
      return reply.status(204).send();
    },
  );

  app.post(
    '/sandboxes/:sandboxID/refreshes',
    { schema: { params: SandboxParams, body: RefreshBody } },
    async (req, reply) => {
      await orch.refresh(req.params.sandboxID, req.body.duration ?? opts.defaultTimeoutSecs);
      return reply.status(204).send();
    },
  );

  app.post('/sandboxes/:sandboxID/pause', { schema: { params: SandboxParams } }, async (req, reply) => {
    const rec = orch.get(req.params.sandboxID);
    if (rec.state === 'paused')
      throw new DomainError('conflict', `sandbox ${rec.sandboxId} is already paused`);
    await orch.pause(req.params.sandboxID);
    return reply.status(204).send();
  });

  const connect =
    (mode: 'extend' | 'set') =>
    async (
      req: { params: { sandboxID: string }; body: { timeout?: number } | undefined },
      reply: import('fastify').FastifyReply,
    ) => {
      const id = req.params.sandboxID;
      const resumed = await orch.connect(id, req.body?.timeout ?? opts.defaultTimeoutSecs, mode);
      return reply.status(resumed ? 201 : 200).send(sandboxBody(orch.get(id), domain));
    };
  const connectSchema = { schema: { params: SandboxParams, body: OptionalTimeoutBody } };
  app.post('/sandboxes/:sandboxID/connect', connectSchema, connect('extend'));
  app.post('/v2/sandboxes/:sandboxID/connect', connectSchema, connect('extend'));
  // The deprecated resume sets the end time, and answers 409 for a running sandbox.
  app.post('/sandboxes/:sandboxID/resume', connectSchema, async (req, reply) => {
    // Unknown here may still be paused on another node sharing the repository: connect looks.
    const rec = orch.find(req.params.sandboxID);
    if (rec?.state === 'running')
      throw new DomainError('conflict', `sandbox ${rec.sandboxId} is already running`);
    return connect('set')(req, reply);
  });

  app.get(
    '/sandboxes/:sandboxID/metrics',
    { schema: { params: SandboxParams, querystring: MetricsQuery } },
    async (req) => {
      const m = await orch.metrics(req.params.sandboxID);
      if (!m) return [];
      return [
        {
          timestamp: new Date(m.ts * 1000).toISOString(),
          timestampUnix: m.ts,
          cpuCount: m.cpu_count,
          cpuUsedPct: m.cpu_used_pct,
          memUsed: m.mem_used,
          memTotal: m.mem_total,
          memCache: m.mem_cache ?? 0,
          diskUsed: m.disk_used,
          diskTotal: m.disk_total,
        },
      ];
    },
  );

  app.get('/sandboxes/:sandboxID/logs', { schema: { params: SandboxParams } }, async (req) => {
    const logs = orch.sandboxLogs(req.params.sandboxID);
    return {
      logs,
      logEntries: logs.map((l) => ({ timestamp: l.timestamp, level: 'info', message: l.line, fields: {} })),
    };
  });

  app.put(
    '/sandboxes/:sandboxID/network',
    { schema: { params: SandboxParams, body: NetworkUpdateBody } },
    async (req, reply) => {
      const current = orch.get(req.params.sandboxID).egress;
      const egress = validateEgress({
        allowInternet: req.body.allow_internet_access ?? current.allowInternet,
        allowOut: req.body.allowOut ?? [],
        denyOut: req.body.denyOut ?? [],
      });
      await orch.setNetwork(req.params.sandboxID, egress);
      return reply.status(204).send();
    },
  );
};

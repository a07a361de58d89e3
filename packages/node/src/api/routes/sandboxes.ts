import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import { DEFAULT_TEMPLATE, DomainError, invalid, parseListQuery, queryPage } from '@agentenv/common';
import { PAUSE_STORED_HEADER } from '@agentenv/protocol';
import { bucketSamples, metricBody, metricsRange, type MetricsHistory } from '../../metrics/index.js';
import { validateEgressRules as validateEgress } from '../../network/index.js';
import { DEFAULT_RESOURCES } from '../../runtime/index.js';
import {
  logLine,
  pauseStored,
  queryLogs,
  visibleState,
  type CreateSandboxInput,
  type Orchestrator,
  type SandboxLogEntry,
  type UsageSample,
} from '../../orchestrator/index.js';

import {
  ColdCreateBody,
  CreateSandboxBody,
  LegacyListQuery,
  ListQuery,
  LogsQuery,
  LogsV2Query,
  ManyMetricsQuery,
  MetricsQuery,
  NetworkUpdateBody,
  OptionalTimeoutBody,
  PauseBody,
  WaitQuery,
  RefreshBody,
  SandboxParams,
  TimeoutBody,
} from '../schemas.js';
import { parseLifecycle } from '../lifecycle.js';
import { refuseUnsupportedCreate, refuseUnsupportedNetworkUpdate } from '../unsupported.js';
import { detailBody, listedBody, sandboxBody } from '../serialize.js';
import type { VolumeMounts } from '../../volumes/index.js';

export interface SandboxRoutesOptions {
  orchestrator: Orchestrator;
  defaultTimeoutSecs: number;
  /** Returned as `domain` so SDKs can build `{port}-{id}.{domain}` hosts; null when none. */
  domain: string | undefined;
  /** Sandboxes' usage history, and a sample taken now when a sandbox has none yet. */
  usage: { history: MetricsHistory; sampleNow(id: string): Promise<UsageSample | undefined> };
  /** Resolves a create's `volumeMounts` (400 for an unknown volume or a bad path). */
  volumes: Pick<VolumeMounts, 'resolve'>;
}

/** E2B's limit on `GET /sandboxes/metrics?sandbox_ids=`. */
const MAX_METRICS_IDS = 100;
/** E2B's default and largest page of log entries. */
const MAX_LOG_ENTRIES = 1000;

/** E2B's SandboxLogEntry. */
const logEntryBody = (e: SandboxLogEntry) => ({
  timestamp: new Date(e.timestampMs).toISOString(),
  level: e.level,
  message: e.message,
  fields: e.fields,
});

/** E2B refuses a timeout of 0 where a sandbox would start already expired (create, resume). */
function refuseZeroTimeout(timeout: number | undefined): void {
  if (timeout === 0) throw invalid('Timeout must be greater than 0');
}

/** A create request's settings, everything but what it starts from (a template or an image). */
export function createInput(
  body: Static<typeof CreateSandboxBody>,
  alwaysSecure: boolean,
  defaultTimeoutSecs: number,
): Omit<CreateSandboxInput, 'source'> {
  refuseZeroTimeout(body.timeout);
  refuseUnsupportedCreate(body);
  const egress = validateEgress({
    allowInternet: body.allow_internet_access ?? true,
    allowOut: body.network?.allowOut ?? [],
    denyOut: body.network?.denyOut ?? [],
  });
  return {
    timeoutSecs: body.timeout ?? defaultTimeoutSecs,
    metadata: body.metadata ?? {},
    envVars: body.envVars ?? {},
    ...parseLifecycle(body),
    secure: alwaysSecure || (body.secure ?? false),
    egress,
    allowPublicTraffic: body.network?.allowPublicTraffic ?? true,
    ...(body.network?.maskRequestHost ? { maskRequestHost: body.network.maskRequestHost } : {}),
  };
}

/** E2B's sandbox endpoints (E2B-COMPAT.md §2). */
// eslint-disable-next-line max-lines-per-function -- declarative: one route after another
export const sandboxRoutes: FastifyPluginAsyncTypebox<SandboxRoutesOptions> = async (app, opts) => {
  const { orchestrator: orch, domain } = opts;

  // v2 creates are always secured (the SDK marks `secure` deprecated and ignores it); v1 asks.
  const create = async (body: Static<typeof CreateSandboxBody>, alwaysSecure: boolean) =>
    orch.create({
      ...createInput(body, alwaysSecure, opts.defaultTimeoutSecs),
      volumeMounts: opts.volumes.resolve(body.volumeMounts ?? []),
      source: { kind: 'named', name: body.templateID ?? DEFAULT_TEMPLATE },
    });
  for (const url of ['/sandboxes', '/v2/sandboxes']) {
    app.post(url, { schema: { body: CreateSandboxBody } }, async (req, reply) => {
      const rec = await create(req.body, url.startsWith('/v2/'));
      return reply.status(201).header('x-agentenv-sandbox-id', rec.sandboxId).send(sandboxBody(rec, domain));
    });
  }

  // AgentENV's create straight from an OCI image (AGENTENV-API.md §1).
  app.post('/sandboxes-cold', { schema: { body: ColdCreateBody } }, async (req, reply) => {
    const b = req.body;
    const body =
      b.allowInternetAccess === undefined ? b : { ...b, allow_internet_access: b.allowInternetAccess };
    const rec = await orch.create({
      ...createInput(body, b.secure ?? false, opts.defaultTimeoutSecs),
      source: {
        kind: 'image',
        image: b.image,
        resources: {
          cpuCount: b.cpuCount ?? DEFAULT_RESOURCES.cpuCount,
          memoryMB: b.memoryMB ?? DEFAULT_RESOURCES.memoryMB,
          diskSizeMB: b.diskSizeMB ?? DEFAULT_RESOURCES.diskSizeMB,
        },
        ...(b.registryAuth ? { credentials: b.registryAuth } : {}),
      },
    });
    return reply.status(201).header('x-agentenv-sandbox-id', rec.sandboxId).send(sandboxBody(rec, domain));
  });

  const listed = () => orch.list().map(listedBody);
  // The deprecated list: running sandboxes only, newest first, no pages.
  app.get('/sandboxes', { schema: { querystring: LegacyListQuery } }, async (req) => {
    const q = parseListQuery({ state: 'running', metadata: req.query.metadata });
    return queryPage(listed(), { ...q, limit: Number.MAX_SAFE_INTEGER }).page;
  });

  app.get('/v2/sandboxes', { schema: { querystring: ListQuery } }, async (req, reply) => {
    const { page, nextToken, totalRunning } = queryPage(listed(), parseListQuery(req.query));
    if (nextToken) void reply.header('x-next-token', nextToken);
    if (totalRunning !== undefined) void reply.header('x-total-running', String(totalRunning));
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

  app.post(
    '/sandboxes/:sandboxID/pause',
    { schema: { params: SandboxParams, body: PauseBody, querystring: WaitQuery } },
    async (req, reply) => {
      const rec = orch.get(req.params.sandboxID);
      if (rec.state === 'paused')
        throw new DomainError('conflict', `sandbox ${rec.sandboxId} is already paused`);
      const kind = req.body?.memory === false ? 'filesystem' : 'memory';
      await orch.pause(rec.sandboxId, 'request', kind, req.query.wait === 'stored');
      const after = orch.find(rec.sandboxId);
      // The gateway records the pause by it: a pause not stored yet waits for this node.
      return reply
        .status(204)
        .header(PAUSE_STORED_HEADER, String(after !== undefined && pauseStored(after)))
        .send();
    },
  );

  const connect =
    (mode: 'extend' | 'set') =>
    async (
      req: { params: { sandboxID: string }; body: { timeout?: number; memory?: boolean } | undefined },
      reply: import('fastify').FastifyReply,
    ) => {
      const id = req.params.sandboxID;
      const resumed = await orch.connect(id, req.body?.timeout ?? opts.defaultTimeoutSecs, {
        endTime: mode,
        boot: req.body?.memory === false ? 'reboot' : 'restore',
      });
      return reply.status(resumed ? 201 : 200).send(sandboxBody(orch.get(id), domain));
    };
  const connectSchema = { schema: { params: SandboxParams, body: OptionalTimeoutBody } };
  app.post('/sandboxes/:sandboxID/connect', connectSchema, connect('extend'));
  app.post('/v2/sandboxes/:sandboxID/connect', connectSchema, connect('extend'));
  // The deprecated resume sets the end time, and answers 409 for a running sandbox.
  app.post('/sandboxes/:sandboxID/resume', connectSchema, async (req, reply) => {
    // Unknown here may still be paused on another node sharing the repository: connect looks.
    refuseZeroTimeout(req.body?.timeout);
    const rec = orch.find(req.params.sandboxID);
    if (rec?.state === 'running')
      throw new DomainError('conflict', `sandbox ${rec.sandboxId} is already running`);
    return connect('set')(req, reply);
  });

  const { usage } = opts;
  app.get(
    '/sandboxes/:sandboxID/metrics',
    { schema: { params: SandboxParams, querystring: MetricsQuery } },
    async (req) => {
      const rec = orch.get(req.params.sandboxID);
      const now = Math.floor(Date.now() / 1000);
      const life = { startedAt: Math.floor(Date.parse(rec.startedAt) / 1000), now };
      let range = metricsRange(req.query, life);
      if (!range) return [];
      let samples = usage.history.samples(rec.sandboxId);
      // A sandbox younger than one sampling round has no history yet: sample it now (the
      // sample is stamped when it completes, which may be the next second).
      const inRange = samples.some((s) => s.ts >= range!.start && s.ts <= range!.end);
      if (!inRange && range.end === now && visibleState(rec.state) === 'running') {
        const s = await usage.sampleNow(rec.sandboxId);
        if (s && (req.query.end === undefined || req.query.end >= s.ts)) {
          samples = [...samples, s];
          range = { start: range.start, end: Math.max(range.end, s.ts) };
        }
      }
      return bucketSamples(samples, range).map(metricBody);
    },
  );

  app.get('/sandboxes/metrics', { schema: { querystring: ManyMetricsQuery } }, async (req) => {
    const ids = [...new Set(req.query.sandbox_ids.split(',').filter((id) => id !== ''))];
    if (ids.length > MAX_METRICS_IDS)
      throw invalid(`Too many sandboxes requested, maximum is ${MAX_METRICS_IDS}`);
    const sandboxes: Record<string, ReturnType<typeof metricBody>> = {};
    await Promise.all(
      ids.map(async (id) => {
        const rec = orch.find(id);
        if (!rec) return;
        const latest =
          usage.history.latest(id) ??
          (visibleState(rec.state) === 'running' ? await usage.sampleNow(id) : undefined);
        if (latest) sandboxes[id] = metricBody(latest);
      }),
    );
    return { sandboxes };
  });

  // The deprecated endpoint (what the e2b CLI reads): raw lines and entries from `start` (ms).
  app.get(
    '/sandboxes/:sandboxID/logs',
    { schema: { params: SandboxParams, querystring: LogsQuery } },
    async (req) => {
      const entries = queryLogs(orch.sandboxLogs(req.params.sandboxID), {
        ...(req.query.start !== undefined ? { cursorMs: req.query.start } : {}),
        limit: req.query.limit ?? MAX_LOG_ENTRIES,
        direction: 'forward',
      });
      return {
        logs: entries.map((e) => ({ timestamp: new Date(e.timestampMs).toISOString(), line: logLine(e) })),
        logEntries: entries.map(logEntryBody),
      };
    },
  );

  app.get(
    '/v2/sandboxes/:sandboxID/logs',
    { schema: { params: SandboxParams, querystring: LogsV2Query } },
    async (req) => {
      const q = req.query;
      const entries = queryLogs(orch.sandboxLogs(req.params.sandboxID), {
        ...(q.cursor !== undefined ? { cursorMs: q.cursor } : {}),
        limit: q.limit ?? MAX_LOG_ENTRIES,
        direction: q.direction ?? 'forward',
        ...(q.level ? { level: q.level } : {}),
        ...(q.search !== undefined ? { search: q.search } : {}),
      });
      return { logs: entries.map(logEntryBody) };
    },
  );

  app.put(
    '/sandboxes/:sandboxID/network',
    { schema: { params: SandboxParams, body: NetworkUpdateBody } },
    async (req, reply) => {
      refuseUnsupportedNetworkUpdate(req.body);
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

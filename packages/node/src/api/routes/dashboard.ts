import {
  DASHBOARD_API_PATH,
  DashboardAssets,
  formatEvent,
  SANDBOX_STATES,
  WINDOW_MS,
  type Catalog,
  type CatalogEntry,
  type DashboardSandbox,
  type LifecycleActivity,
  type SandboxPage,
  type Summary,
} from '@agentenv/dashboard';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { SandboxEventLog } from '../../cluster/index.js';
import type { Orchestrator, SandboxRecord, UsageSample } from '../../orchestrator/index.js';
import type { RuntimeCache, SnapshotRecord, SnapshotStore } from '@agentenv/snapshot';
import { EventStreams, notFound, parseMetadataQuery, type StreamLimits } from '@agentenv/common';
import { PUBLIC_ROUTE } from '../auth.js';
import { SandboxParams } from '../schemas.js';
import type { SandboxRoutesOptions } from './sandboxes.js';

type Usage = SandboxRoutesOptions['usage'];

export interface DashboardRoutesOptions {
  orchestrator: Orchestrator;
  activity: LifecycleActivity;
  /** The node's lifecycle events, which the stream passes on as they are recorded. */
  events: Pick<SandboxEventLog, 'onEvent'>;
  /** GET /nodes' body for this node. */
  nodeStatus: () => { nodeID: string } & Record<string, unknown>;
  snapshots: { store: SnapshotStore; cache: RuntimeCache };
  /** What sandboxes use, as the node samples it for the metrics endpoints. */
  usage: Usage;
  /** How many streams may be open and what each may hold unsent (default DEFAULT_STREAM_LIMITS). */
  streamLimits?: StreamLimits;
}

/** Node status and a watched sandbox's metrics go out on the stream this often. */
const TICK_MS = 2000;
const KEEPALIVE_MS = 15_000;
/** A sandbox not sampled yet gets this long to say what it uses before its row shows none. */
const METRICS_TIMEOUT_MS = 1000;

const ListQuery = Type.Object({
  state: Type.Optional(Type.String({ pattern: '^[a-z]+(,[a-z]+)*$', maxLength: 200 })),
  template: Type.Optional(Type.String({ maxLength: 256 })),
  q: Type.Optional(Type.String({ maxLength: 128 })),
  metadata: Type.Optional(Type.String({ maxLength: 4096 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
});

/**
 * The dashboard (packages/dashboard) on a stand-alone node: its pages at /dashboard, and the
 * data its views need beyond the public API under /dashboard/api (same key, same errors): the
 * overview's numbers, a filtered page of sandboxes with what they use, the capture catalogue
 * with sizes and parents, and one event stream of lifecycle events and metrics. A sandbox's
 * past events are the public `GET /sandboxes/{id}/events`.
 */
// eslint-disable-next-line max-lines-per-function -- declarative: one route after another
export const dashboardRoutes: FastifyPluginAsyncTypebox<DashboardRoutesOptions> = async (app, opts) => {
  const { orchestrator: orch, activity } = opts;
  const nodeID = opts.nodeStatus().nodeID;
  const assets = DashboardAssets.load();
  const streams = new Set<FastifyReply>();
  const gate = new EventStreams(opts.streamLimits);
  // Open streams would hold the server's close; they end first, and the app reconnects elsewhere.
  app.addHook('preClose', async () => {
    for (const r of streams) r.raw.end();
  });

  const page = (req: { url: string; headers: { 'if-none-match'?: string } }, reply: FastifyReply) => {
    const a = assets.lookup(req.url.split('?')[0]!, req.headers['if-none-match']);
    return reply.status(a.status).headers(a.headers).send(a.body);
  };
  app.get('/dashboard', { schema: { hide: true }, config: PUBLIC_ROUTE }, page);
  app.get('/dashboard/*', { schema: { hide: true }, config: PUBLIC_ROUTE }, page);
  // The API's unknown paths are not pages: they need the key, as every unknown path does.
  app.get(`${DASHBOARD_API_PATH}/*`, { schema: { hide: true } }, async (req) => {
    throw notFound(`no route for GET ${req.url.split('?')[0]}`);
  });

  app.get(`${DASHBOARD_API_PATH}/summary`, { schema: { hide: true } }, async (): Promise<Summary> => {
    const counts = Object.fromEntries(SANDBOX_STATES.map((s) => [s, 0]));
    for (const [s, n] of Object.entries(orch.counts())) counts[s] = n;
    return { nodeIDs: [nodeID], now: Date.now(), windowMs: WINDOW_MS, counts, samples: activity.recent() };
  });

  app.get(
    `${DASHBOARD_API_PATH}/sandboxes`,
    { schema: { hide: true, querystring: ListQuery } },
    async (req): Promise<SandboxPage> => {
      const q = req.query;
      const states = q.state ? new Set(q.state.split(',')) : undefined;
      const meta = parseMetadataQuery(q.metadata);
      const needle = q.q?.toLowerCase();
      const all = orch
        .list()
        .filter(
          (r) =>
            (!states || states.has(r.state)) &&
            (!q.template || r.templateId === q.template || r.alias === q.template) &&
            (!needle || r.sandboxId.includes(needle) || r.templateId.toLowerCase().includes(needle)) &&
            Object.entries(meta).every(([k, v]) => r.metadata[k] === v),
        );
      const offset = q.offset ?? 0;
      const limit = q.limit ?? 25;
      const rows = all.slice(offset, offset + limit);
      const items = rows.map((r) => withUsage(opts.usage, r, nodeID));
      return { items, total: all.length, offset, limit };
    },
  );

  app.get(`${DASHBOARD_API_PATH}/catalog`, { schema: { hide: true } }, async (): Promise<Catalog> => {
    const { store, cache } = opts.snapshots;
    const [snapshots, templates] = await Promise.all([
      store.listAll({ labels: { kind: 'snapshot' } }),
      store.listAll({ labels: { kind: 'template' } }),
    ]);
    const stats = cache.stats();
    return {
      entries: [...snapshots.map(snapshotEntry), ...templates.map(templateEntry)],
      caches: [
        {
          nodeID,
          usedBytes: stats.usedBytes,
          capacityBytes: stats.capacityBytes,
          entries: stats.entries.length,
        },
      ],
    };
  });

  app.get(
    `${DASHBOARD_API_PATH}/stream`,
    {
      schema: {
        hide: true,
        querystring: Type.Object({ sandboxID: Type.Optional(SandboxParams.properties.sandboxID) }),
      },
    },
    async (req, reply) => {
      const only = req.query.sandboxID;
      const key = req.headers['x-api-key'];
      gate.admit(typeof key === 'string' ? key : undefined, reply.raw);
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
      });
      // A client that stops reading is dropped rather than buffered for (gate.write).
      const send = (event: string, data: unknown) => gate.write(res, formatEvent(event, data));
      send('hello', { nodeIDs: [nodeID], now: Date.now() });
      streams.add(reply);
      const offs = [
        opts.events.onEvent((e) => (!only || e.sandboxID === only) && send('sandbox', e)),
        activity.subscribe((s) => send('stage', s)),
      ];
      let lastSample = 0;
      const tick = async () => {
        send('node', opts.nodeStatus());
        const rec = only ? orch.find(only) : undefined;
        const m = rec && (await latestUsage(opts.usage, rec));
        // Each sample once: the node samples every few seconds, the stream ticks more often.
        if (m && m.ts !== lastSample) {
          lastSample = m.ts;
          send('sandbox-metrics', {
            sandboxID: rec.sandboxId,
            timestampUnix: m.ts,
            cpuCount: m.cpuCount,
            cpuUsedPct: m.cpuUsedPct,
            memUsed: m.memUsed,
            memTotal: m.memTotal,
            diskUsed: m.diskUsed,
            diskTotal: m.diskTotal,
          });
        }
      };
      void tick();
      const timers = [
        setInterval(() => void tick(), TICK_MS),
        setInterval(() => gate.write(res, ': keepalive\n\n'), KEEPALIVE_MS),
      ];
      res.once('close', () => {
        for (const off of offs) off();
        for (const t of timers) clearInterval(t);
        streams.delete(reply);
      });
    },
  );
};

/** The newest usage sample of a sandbox; one taken now if it is running and has none yet. */
async function latestUsage(usage: Usage, r: SandboxRecord): Promise<UsageSample | undefined> {
  const known = usage.history.latest(r.sandboxId);
  if (known || r.state !== 'running') return known;
  return withTimeout(usage.sampleNow(r.sandboxId), METRICS_TIMEOUT_MS).catch(() => undefined);
}

/** A table row: the record's listed fields, and what it used when last sampled (while it runs). */
function withUsage(usage: Usage, r: SandboxRecord, nodeID: string): DashboardSandbox {
  const row: DashboardSandbox = {
    sandboxID: r.sandboxId,
    templateID: r.templateId,
    ...(r.alias ? { alias: r.alias } : {}),
    nodeID,
    state: r.state,
    startedAt: r.startedAt,
    endAt: r.endAt,
    cpuCount: r.cpuCount,
    memoryMB: r.memoryMB,
    diskSizeMB: r.diskSizeMB,
    metadata: r.metadata,
  };
  if (r.state !== 'running') return row;
  // The newest sample only: a page never waits for a sandbox to be measured (a new one shows
  // its usage from the node's next sampling round on).
  const m = usage.history.latest(r.sandboxId);
  return m ? { ...row, cpuUsedPct: m.cpuUsedPct, memUsedMiB: Math.round(m.memUsed / 2 ** 20) } : row;
}

function snapshotEntry(r: SnapshotRecord): CatalogEntry {
  const info = (r.meta as { info?: { names?: string[]; sourceSandboxId?: string; templateId?: string } })
    .info;
  return {
    id: r.id,
    kind: 'snapshot',
    names: info?.names ?? [],
    ...(r.parent ? { parent: r.parent } : {}),
    bytesTotal: r.bytesTotal,
    createdAt: r.createdAt,
    ...(info?.sourceSandboxId ? { sandboxID: info.sourceSandboxId } : {}),
    ...(info?.templateId ? { templateID: info.templateId } : {}),
  };
}

function templateEntry(r: SnapshotRecord): CatalogEntry {
  const t = (r.meta as { template?: { templateID?: string; buildID?: string; names?: string[] } }).template;
  return {
    id: r.id,
    kind: 'template',
    names: t?.names ?? [],
    ...(r.parent ? { parent: r.parent } : {}),
    bytesTotal: r.bytesTotal,
    createdAt: r.createdAt,
    ...(t?.templateID ? { templateID: t.templateID } : {}),
    ...(t?.buildID ? { buildID: t.buildID } : {}),
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

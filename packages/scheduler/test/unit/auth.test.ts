import { SchedulerService } from '@agentenv/protocol/scheduler';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pathVariants, probe } from '@agentenv/test-support';
import { startScheduler, type SchedulerApp } from '../../src/server/app.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { ManualClock, settings } from './helpers.js';

const KEY = 'sched-test-key-0123456789';
const KEYS = { none: undefined, wrong: 'sched-wrong-key-00000000', right: KEY } as const;

let app: SchedulerApp;

beforeAll(async () => {
  const clock = new ManualClock();
  app = await startScheduler({
    host: '127.0.0.1',
    port: 0,
    apiKey: KEY,
    store: new MemoryStore(clock),
    settings: settings(),
    logger: pino({ level: 'silent' }),
    clock,
  });
});
afterAll(() => app?.close());

type Route = { method: string; path: string; access: 'public' | 'key'; rpc?: 'unary' | 'stream' };

/** Every RPC of the service (from its descriptor: a new one is in the table) and the plain routes. */
const routes = (): Route[] => [
  ...SchedulerService.methods.map((m): Route => ({
    method: 'POST',
    path: `/${SchedulerService.typeName}/${m.name}`,
    access: 'key',
    rpc: m.methodKind === 'unary' ? 'unary' : 'stream',
  })),
  { method: 'GET', path: '/health', access: 'public' },
  { method: 'GET', path: '/metrics', access: 'public' },
  { method: 'GET', path: '/nowhere', access: 'key' },
  { method: 'POST', path: '/health', access: 'key' },
];

/** A well-formed empty request of the Connect protocol, so what answers is the key check. */
function rpcBody(kind: Route['rpc']): { type: string; body?: Buffer } {
  if (kind === 'unary') return { type: 'application/json', body: Buffer.from('{}') };
  if (kind === 'stream') {
    const envelope = Buffer.alloc(5);
    envelope.writeUInt32BE(2, 1);
    return { type: 'application/connect+json', body: Buffer.concat([envelope, Buffer.from('{}')]) };
  }
  return { type: 'application/json' };
}

describe('the scheduler authenticates every call but /health and /metrics', () => {
  it('answers every route × key × spelling as its access says', { timeout: 60_000 }, async () => {
    const failures: string[] = [];
    for (const { method, path, access, rpc } of routes()) {
      const { type, body } = rpcBody(rpc);
      const cases = pathVariants(path).flatMap((v) =>
        Object.entries(KEYS).map(([name, key]) => ({ v, name, key })),
      );
      await Promise.all(
        cases.map(async ({ v, name, key }) => {
          const headers: Record<string, string> = { 'content-type': type };
          if (key) headers['x-api-key'] = key;
          // Watches stream until cut: a status is all this table reads of them.
          const r = await probe(app.port, { method, path: v.path, headers, body, timeoutMs: 500 }).catch(
            () => ({
              status: 0,
              body: '',
            }),
          );
          const what = `${method} ${v.path} (${v.name}, ${name} key) → ${r.status} ${r.body.slice(0, 80)}`;
          // A streaming RPC's error is its end-of-stream message, after a 200 (the Connect protocol).
          const refused = r.status === 401 || (r.status === 200 && r.body.includes('"unauthenticated"'));
          if (key === KEY) {
            if (refused) failures.push(what);
          } else if (access === 'key' && v.sameRoute) {
            if (!refused) failures.push(what);
          } else if (r.status === 0 || r.status >= 500 || (access === 'key' && r.status < 400 && !refused))
            failures.push(what);
        }),
      );
    }
    expect(failures).toEqual([]);
  });

  it('answers malformed targets with a 4xx and keeps serving', async () => {
    for (const path of ['//', '/%E0', '/a%zz', '/x%00', '*']) {
      const { status } = await probe(app.port, { method: 'GET', path });
      expect(status >= 400 && status < 500, `${path} → ${status}`).toBe(true);
    }
    const rpc = `/${SchedulerService.typeName}/ListNodes`;
    for (const host of ['[::1', 'a b'])
      expect((await probe(app.port, { method: 'POST', path: rpc, headers: { host } })).status, host).toBe(
        400,
      );
    expect((await probe(app.port, { method: 'GET', path: '/health' })).status).toBe(204);
  });
});

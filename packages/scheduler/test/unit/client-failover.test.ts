import { createServer, type Server, type Socket } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSchedulerClient, schedulerUrls } from '../../src/client.js';
import { startScheduler, type SchedulerApp } from '../../src/server/app.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { ManualClock, settings } from './helpers.js';

const KEY = 'sched-failover-key-0123456789';

/** Two replicas on one store, as two processes share one Redis. */
let replicas: SchedulerApp[];
let urls: string[];
/** A port nothing listens on: a replica that is down. */
let downUrl: string;
/** A replica whose host went silent: connections are taken and never answered. */
let silent: Server;
let silentUrl: string;
const held: Socket[] = [];

async function replica(store: MemoryStore, clock: ManualClock): Promise<SchedulerApp> {
  return startScheduler({
    host: '127.0.0.1',
    port: 0,
    apiKey: KEY,
    store,
    settings: settings(),
    logger: pino({ level: 'silent' }),
    clock,
  });
}

beforeAll(async () => {
  const clock = new ManualClock();
  const store = new MemoryStore(clock);
  replicas = [await replica(store, clock), await replica(store, clock)];
  urls = replicas.map((r) => `http://127.0.0.1:${r.port}`);
  const gone = await replica(store, clock);
  downUrl = `http://127.0.0.1:${gone.port}`;
  await gone.close();
  silent = createServer((socket) => void held.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
});
afterAll(async () => {
  for (const r of replicas) await r.close().catch(() => undefined);
  for (const socket of held) socket.destroy();
  silent.close();
});

const heartbeatOf = (nodeId: string) => ({
  nodeId,
  advertiseUrl: 'http://127.0.0.1:1',
  version: '0.1.0',
  clusterId: 'default',
  bootId: `boot-${nodeId}`,
  capacity: { cpuCount: 4, memoryTotalMib: 8192, maxSandboxes: 10, maxConcurrentStarts: 2 },
});

describe('a client of replicated schedulers', () => {
  it('goes past a replica it cannot reach to one that answers', async () => {
    const client = createSchedulerClient({ url: `${downUrl},${urls[0]}`, apiKey: KEY });
    await expect(client.listNodes({})).resolves.toBeDefined();
  });

  it('asks the next replica when one leaves a call unanswered, and that one first from then on', async () => {
    const client = createSchedulerClient({
      url: `${silentUrl},${urls[1]}`,
      apiKey: KEY,
      failoverAfterMs: 300,
    });
    await expect(client.listNodes({})).resolves.toBeDefined();
    expect(held).toHaveLength(1);
    await client.listNodes({});
    expect(held).toHaveLength(1);
  });

  it('keeps answering when the replica it used stops, with what the other replica sees', async () => {
    const client = createSchedulerClient({ url: urls.join(','), apiKey: KEY });
    await client.heartbeat(heartbeatOf('fo-1'));
    await replicas[0]!.close();
    await client.heartbeat(heartbeatOf('fo-2'));
    const { nodes } = await client.listNodes({});
    expect(nodes.map((n) => n.ref?.nodeId).sort()).toEqual(['fo-1', 'fo-2']);
  });

  it('passes on a replica’s refusal instead of asking the next one', async () => {
    const client = createSchedulerClient({
      url: `${urls[1]},${downUrl}`,
      apiKey: 'sched-wrong-key-000000000',
    });
    const err = await client.listNodes({}).catch((e: unknown) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
  });

  it('fails with the transport error when no replica can be reached', async () => {
    const client = createSchedulerClient({ url: `${downUrl},${downUrl}/`, apiKey: KEY });
    const err = await client.listNodes({}).catch((e: unknown) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unavailable);
  });
});

describe('schedulerUrls', () => {
  it('splits a comma-separated list and refuses what is not an http(s) URL', () => {
    expect(schedulerUrls(' http://a:9090/, https://b:9091 ')).toEqual(['http://a:9090', 'https://b:9091']);
    expect(() => schedulerUrls('')).toThrow(/no scheduler URL/);
    expect(() => schedulerUrls('http://a:9090,nope')).toThrow(/not a URL: nope/);
    expect(() => schedulerUrls('ftp://a:21')).toThrow(/not an http\(s\) URL/);
  });
});

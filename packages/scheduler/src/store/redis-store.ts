import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import type { Clock } from '../clock.js';
import { DomainError } from '@agentenv/common';
import type {
  AnnouncedCapture,
  Binding,
  NodeRecord,
  Reservation,
  RosterEntry,
  SandboxEvent,
} from '../model.js';
import { announcedId, DEFAULT_EVENT_RETENTION, type EventRetention, type SchedulerStore } from './store.js';

/** Deletes bindings only where they still point at the node (ARGV[1]); unindexes them anyway. */
const DELETE_IF_ON_NODE = `
for i = 2, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v and cjson.decode(v).nodeId == ARGV[1] then redis.call('DEL', KEYS[i]) end
  redis.call('SREM', KEYS[1], ARGV[i])
end
return 0`;

export interface RedisStoreOptions {
  url: string;
  /** Key prefix, so several clusters can share one Redis. */
  prefix?: string;
  clock: Clock;
  retention?: EventRetention;
}

/**
 * State in Redis, so a scheduler restart or a second replica sees the same nodes, bindings,
 * reservations and events. Bindings are keys with a TTL (refreshed by rosters); events are
 * bounded lists and a pub/sub channel that every replica forwards to its watchers.
 */
export class RedisStore implements SchedulerStore {
  private readonly redis: Redis;
  private subscriber: Redis | undefined;
  private readonly bus = new EventEmitter().setMaxListeners(0);
  private readonly p: string;
  private readonly retention: EventRetention;
  private readonly clock: Clock;

  private constructor(opts: RedisStoreOptions, redis: Redis) {
    this.redis = redis;
    this.p = opts.prefix ?? 'aenv:sched:';
    this.clock = opts.clock;
    this.retention = opts.retention ?? DEFAULT_EVENT_RETENTION;
    redis.defineCommand('deleteIfOnNode', { lua: DELETE_IF_ON_NODE });
  }

  /** Connects and checks the server answers; a wrong URL is a startup error, not a hang. */
  static async open(opts: RedisStoreOptions): Promise<RedisStore> {
    const redis = new Redis(opts.url, {
      lazyConnect: true,
      connectTimeout: 3000,
      // A call during an outage fails fast (the gateway retries) instead of queueing for long.
      maxRetriesPerRequest: 2,
      retryStrategy: (n) => Math.min(n * 200, 2000),
    });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      await redis.ping();
    } catch (err) {
      redis.disconnect();
      throw new DomainError('unavailable', `cannot reach redis at ${opts.url}: ${(err as Error).message}`);
    }
    return new RedisStore(opts, redis);
  }

  private async run<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof DomainError) throw err;
      throw new DomainError(
        'unavailable',
        `scheduler store (redis) failed to ${what}: ${(err as Error).message}`,
        1,
      );
    }
  }

  private k(...parts: string[]): string {
    return this.p + parts.join(':');
  }

  putNode(node: NodeRecord, roster: readonly RosterEntry[]): Promise<void> {
    return this.run('store a node', async () => {
      await this.redis
        .multi()
        .hset(this.k('nodes'), node.nodeId, JSON.stringify(node))
        .set(this.k('roster', node.nodeId), JSON.stringify(roster))
        .exec();
    });
  }

  getNode(nodeId: string): Promise<NodeRecord | undefined> {
    return this.run('read a node', async () =>
      parse<NodeRecord>(await this.redis.hget(this.k('nodes'), nodeId)),
    );
  }

  listNodes(): Promise<NodeRecord[]> {
    return this.run('list nodes', async () =>
      Object.values(await this.redis.hgetall(this.k('nodes'))).map((v) => JSON.parse(v) as NodeRecord),
    );
  }

  getRoster(nodeId: string): Promise<RosterEntry[]> {
    return this.run(
      'read a roster',
      async () => parse<RosterEntry[]>(await this.redis.get(this.k('roster', nodeId))) ?? [],
    );
  }

  putChunkKeys(nodeId: string, keys: readonly string[]): Promise<void> {
    return this.run(
      'store chunk keys',
      async () => void (await this.redis.set(this.k('chunks', nodeId), JSON.stringify(keys))),
    );
  }

  getChunkKeys(nodeId: string): Promise<string[]> {
    return this.run(
      'read chunk keys',
      async () => parse<string[]>(await this.redis.get(this.k('chunks', nodeId))) ?? [],
    );
  }

  putDrain(nodeId: string, bootId: string): Promise<void> {
    return this.run(
      'store a drain',
      async () => void (await this.redis.hset(this.k('drains'), nodeId, bootId)),
    );
  }

  drains(): Promise<Map<string, string>> {
    return this.run(
      'read drains',
      async () => new Map(Object.entries(await this.redis.hgetall(this.k('drains')))),
    );
  }

  getBindings(sandboxIds: readonly string[]): Promise<Map<string, Binding>> {
    return this.run('read bindings', async () => {
      const out = new Map<string, Binding>();
      if (sandboxIds.length === 0) return out;
      const values = await this.redis.mget(sandboxIds.map((id) => this.k('b', id)));
      values.forEach((v, i) => {
        const b = parse<Binding>(v);
        if (b) out.set(sandboxIds[i]!, b);
      });
      return out;
    });
  }

  nodeBindings(nodeId: string): Promise<Binding[]> {
    return this.run('read bindings', async () => {
      const ids = await this.redis.smembers(this.k('nb', nodeId));
      const found = await this.getBindings(ids);
      const stale = ids.filter((id) => found.get(id)?.nodeId !== nodeId);
      if (stale.length) await this.redis.srem(this.k('nb', nodeId), ...stale);
      return [...found.values()].filter((b) => b.nodeId === nodeId);
    });
  }

  putBindings(bindings: readonly Binding[], ttlMs: number): Promise<void> {
    return this.run('store bindings', async () => {
      if (bindings.length === 0) return;
      const m = this.redis.pipeline();
      for (const b of bindings) {
        m.set(this.k('b', b.sandboxId), JSON.stringify(b), 'PX', Math.max(1, Math.round(ttlMs)));
        m.sadd(this.k('nb', b.nodeId), b.sandboxId);
      }
      await m.exec();
    });
  }

  deleteBindings(sandboxIds: readonly string[], nodeId: string): Promise<void> {
    return this.run('delete bindings', async () => {
      if (sandboxIds.length === 0) return;
      const keys = [this.k('nb', nodeId), ...sandboxIds.map((id) => this.k('b', id))];
      await (this.redis as unknown as DeleteIfOnNode).deleteIfOnNode(
        keys.length,
        ...keys,
        nodeId,
        ...sandboxIds,
      );
    });
  }

  putReservation(r: Reservation): Promise<void> {
    return this.run(
      'store a reservation',
      async () => void (await this.redis.hset(this.k('rsv'), r.id, JSON.stringify(r))),
    );
  }

  takeReservation(id: string): Promise<Reservation | undefined> {
    return this.run('take a reservation', async () => {
      const res = await this.redis.multi().hget(this.k('rsv'), id).hdel(this.k('rsv'), id).exec();
      // Only the caller whose HDEL removed it owns it: a second replica taking it gets nothing.
      const removed = res?.[1]?.[1] === 1;
      const r = removed ? parse<Reservation>(res?.[0]?.[1] as string | null) : undefined;
      return r && r.expiresMs > this.clock.now() ? r : undefined;
    });
  }

  listReservations(): Promise<Reservation[]> {
    return this.run('list reservations', () => this.unexpired<Reservation>('rsv'));
  }

  /** The records of a hash not yet expired; the expired ones are deleted on the way. */
  private async unexpired<T extends { expiresMs: number }>(hash: string): Promise<T[]> {
    const now = this.clock.now();
    const all = Object.entries(await this.redis.hgetall(this.k(hash))).map(
      ([id, v]) => [id, JSON.parse(v) as T] as const,
    );
    const expired = all.filter(([, r]) => r.expiresMs <= now).map(([id]) => id);
    if (expired.length) await this.redis.hdel(this.k(hash), ...expired);
    return all.filter(([, r]) => r.expiresMs > now).map(([, r]) => r);
  }

  putAnnouncedCaptures(captures: readonly AnnouncedCapture[]): Promise<void> {
    return this.run('store announced captures', async () => {
      if (captures.length === 0) return;
      await this.redis.hset(
        this.k('cap'),
        Object.fromEntries(captures.map((c) => [announcedId(c), JSON.stringify(c)])),
      );
    });
  }

  listAnnouncedCaptures(): Promise<AnnouncedCapture[]> {
    return this.run('list announced captures', () => this.unexpired<AnnouncedCapture>('cap'));
  }

  deleteAnnouncedCaptures(captures: readonly AnnouncedCapture[]): Promise<void> {
    return this.run('delete announced captures', async () => {
      if (captures.length) await this.redis.hdel(this.k('cap'), ...captures.map(announcedId));
    });
  }

  appendEvent(e: SandboxEvent): Promise<void> {
    return this.run('store an event', async () => {
      const json = JSON.stringify(e);
      const key = this.k('ev', e.sandboxId);
      await this.redis
        .multi()
        .rpush(key, json)
        .ltrim(key, -this.retention.perSandbox, -1)
        .pexpire(key, this.retention.ttlMs)
        .publish(this.k('events'), json)
        .exec();
    });
  }

  listEvents(sandboxId: string, limit: number): Promise<SandboxEvent[]> {
    return this.run('read events', async () =>
      (await this.redis.lrange(this.k('ev', sandboxId), -limit, -1)).map(
        (v) => JSON.parse(v) as SandboxEvent,
      ),
    );
  }

  subscribeEvents(listener: (e: SandboxEvent) => void): () => void {
    if (!this.subscriber) {
      const sub = this.redis.duplicate();
      sub.on('error', () => undefined);
      sub.on('message', (_channel: string, message: string) => {
        const e = parse<SandboxEvent>(message);
        if (e) this.bus.emit('event', e);
      });
      void sub.subscribe(this.k('events')).catch(() => undefined);
      this.subscriber = sub;
    }
    this.bus.on('event', listener);
    return () => void this.bus.off('event', listener);
  }

  claimOnce(key: string, ttlMs: number): Promise<boolean> {
    return this.run(
      'claim',
      async () => (await this.redis.set(this.k('claim', key), '1', 'PX', ttlMs, 'NX')) === 'OK',
    );
  }

  async close(): Promise<void> {
    this.bus.removeAllListeners();
    this.subscriber?.disconnect();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

interface DeleteIfOnNode {
  deleteIfOnNode(numKeys: number, ...args: string[]): Promise<number>;
}

function parse<T>(v: string | null | undefined): T | undefined {
  return v ? (JSON.parse(v) as T) : undefined;
}

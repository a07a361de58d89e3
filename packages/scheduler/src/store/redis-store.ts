import { EventEmitter } from 'node:events';
import { Redis, type ChainableCommander } from 'ioredis';
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

/** Unindexes the node ids (ARGV) whose record (KEYS[2..]) is gone, unless written meanwhile. */
const PRUNE_NODES = `
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then redis.call('SREM', KEYS[1], ARGV[i - 1]) end
end
return 0`;

const px = (ms: number) => Math.max(1, Math.round(ms));

export interface RedisStoreOptions {
  url: string;
  /** Key prefix, so several clusters can share one Redis. */
  prefix?: string;
  clock: Clock;
  retention?: EventRetention;
}

/**
 * State in Redis, so a scheduler restart or a second replica sees the same nodes, bindings,
 * reservations and events. Every key expires: a node's keys (record, roster, chunk keys, drain
 * mark, binding index) with the TTL its heartbeats refresh, bindings with theirs (refreshed by
 * rosters), the hashes of reservations and announced captures with their latest entry; events are
 * bounded lists and a pub/sub channel that every replica forwards to its watchers.
 */
export class RedisStore implements SchedulerStore {
  readonly shared = true;
  private readonly redis: Redis;
  private subscriber: Redis | undefined;
  private readonly bus = new EventEmitter().setMaxListeners(0);
  private readonly p: string;
  private readonly retention: EventRetention;
  private readonly clock: Clock;
  private backMs: number | undefined;

  private constructor(opts: RedisStoreOptions, redis: Redis) {
    this.redis = redis;
    // Built once connected, so every 'ready' from now on is a reconnect.
    redis.on('ready', () => (this.backMs = this.clock.now()));
    this.p = opts.prefix ?? 'aenv:sched:';
    this.clock = opts.clock;
    this.retention = opts.retention ?? DEFAULT_EVENT_RETENTION;
    redis.defineCommand('deleteIfOnNode', { lua: DELETE_IF_ON_NODE });
    redis.defineCommand('pruneNodes', { lua: PRUNE_NODES });
  }

  /** Connects and checks the server answers; a wrong URL is a startup error, not a hang. */
  static async open(opts: RedisStoreOptions): Promise<RedisStore> {
    const redis = new Redis(opts.url, {
      lazyConnect: true,
      connectTimeout: 3000,
      // Commands issued in one tick (concurrent heartbeats and placements) go in one round trip.
      enableAutoPipelining: true,
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

  reconnectedAtMs(): number | undefined {
    return this.backMs;
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

  putNode(node: NodeRecord, roster: readonly RosterEntry[], ttlMs: number): Promise<void> {
    return this.run('store a node', async () => {
      const id = node.nodeId;
      const ms = px(ttlMs);
      await this.redis
        .multi()
        .set(this.k('node', id), JSON.stringify(node), 'PX', ms)
        .set(this.k('roster', id), JSON.stringify(roster), 'PX', ms)
        .sadd(this.k('nodeids'), id)
        .pexpire(this.k('nodeids'), ms)
        .pexpire(this.k('chunks', id), ms)
        .pexpire(this.k('drain', id), ms)
        .pexpire(this.k('nb', id), ms, 'GT')
        .exec();
    });
  }

  getNode(nodeId: string): Promise<NodeRecord | undefined> {
    return this.run('read a node', async () =>
      parse<NodeRecord>(await this.redis.get(this.k('node', nodeId))),
    );
  }

  listNodes(): Promise<NodeRecord[]> {
    return this.run('list nodes', async () => {
      const { ids, values } = await this.perNode('node');
      const gone = ids.filter((_, i) => !values[i]);
      if (gone.length)
        await (this.redis as unknown as PruneNodes).pruneNodes(
          gone.length + 1,
          this.k('nodeids'),
          ...gone.map((id) => this.k('node', id)),
          ...gone,
        );
      return values.flatMap((v) => (v ? [JSON.parse(v) as NodeRecord] : []));
    });
  }

  /** The indexed node ids, each with its value of one per-node key. */
  private async perNode(kind: string): Promise<{ ids: string[]; values: (string | null)[] }> {
    const ids = await this.redis.smembers(this.k('nodeids'));
    const values = ids.length ? await this.redis.mget(ids.map((id) => this.k(kind, id))) : [];
    return { ids, values };
  }

  getRoster(nodeId: string): Promise<RosterEntry[]> {
    return this.run(
      'read a roster',
      async () => parse<RosterEntry[]>(await this.redis.get(this.k('roster', nodeId))) ?? [],
    );
  }

  putChunkKeys(nodeId: string, keys: readonly string[], ttlMs: number): Promise<void> {
    return this.run(
      'store chunk keys',
      async () =>
        void (await this.redis.set(this.k('chunks', nodeId), JSON.stringify(keys), 'PX', px(ttlMs))),
    );
  }

  getChunkKeys(nodeId: string): Promise<string[]> {
    return this.run(
      'read chunk keys',
      async () => parse<string[]>(await this.redis.get(this.k('chunks', nodeId))) ?? [],
    );
  }

  putDrain(nodeId: string, bootId: string, ttlMs: number): Promise<void> {
    return this.run(
      'store a drain',
      async () => void (await this.redis.set(this.k('drain', nodeId), bootId, 'PX', px(ttlMs))),
    );
  }

  drains(): Promise<Map<string, string>> {
    return this.run('read drains', async () => {
      const { ids, values } = await this.perNode('drain');
      return new Map(ids.flatMap((id, i) => (values[i] ? [[id, values[i]] as const] : [])));
    });
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
        m.set(this.k('b', b.sandboxId), JSON.stringify(b), 'PX', px(ttlMs));
        m.sadd(this.k('nb', b.nodeId), b.sandboxId);
      }
      for (const nodeId of new Set(bindings.map((b) => b.nodeId))) extend(m, this.k('nb', nodeId), ttlMs);
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

  putReservations(rs: readonly Reservation[]): Promise<void> {
    return this.run('store reservations', async () => {
      if (rs.length === 0) return;
      const m = this.redis
        .multi()
        .hset(this.k('rsv'), Object.fromEntries(rs.map((r) => [r.id, JSON.stringify(r)])));
      extend(m, this.k('rsv'), Math.max(...rs.map((r) => r.expiresMs)) - this.clock.now());
      await m.exec();
    });
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
      const m = this.redis
        .multi()
        .hset(this.k('cap'), Object.fromEntries(captures.map((c) => [announcedId(c), JSON.stringify(c)])));
      extend(m, this.k('cap'), Math.max(...captures.map((c) => c.expiresMs)) - this.clock.now());
      await m.exec();
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

interface PruneNodes {
  pruneNodes(numKeys: number, ...args: string[]): Promise<number>;
}

/**
 * Gives a key that gathers records of several lifetimes (a hash, an index set) at least `ms`
 * more: a key without a TTL gets one, a shorter one is lengthened, a longer one stands.
 */
function extend(m: ChainableCommander, key: string, ms: number): void {
  m.pexpire(key, px(ms), 'NX').pexpire(key, px(ms), 'GT');
}

function parse<T>(v: string | null | undefined): T | undefined {
  return v ? (JSON.parse(v) as T) : undefined;
}

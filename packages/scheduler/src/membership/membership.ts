import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import { invalid, notFound, DomainError } from '@agentenv/common';
import { confirmed, snapshotKeys, withAnnounced } from '../schedule/captures.js';
import { MISSED_INTERVALS, nodeStatus, type Watch } from './health.js';
import {
  NO_RESERVATION,
  reservedByNode,
  type NodeCapacity,
  type NodeLoad,
  type NodeRecord,
  type NodeStatus,
  type P2pEndpoint,
  type Reserved,
  type RosterEntry,
} from '../model.js';
import { NodeIndex } from './node-index.js';
import { RosterSync } from './roster-sync.js';
import { nodeRetentionMs, REPORT_GRACE_INTERVALS, type SchedulerSettings } from '../settings.js';
import type { SchedulerStore } from '../store/store.js';

/** What a node reports every interval. */
export interface HeartbeatInput {
  nodeId: string;
  advertiseUrl: string;
  version: string;
  clusterId: string;
  bootId: string;
  status: 'ready' | 'draining';
  capacity: NodeCapacity;
  load: NodeLoad;
  roster: RosterEntry[];
  cacheKeys: string[];
  chunkKeys: string[];
  p2p?: P2pEndpoint;
}

/** A node with its health now and what is reserved on it. */
export interface NodeView {
  node: NodeRecord;
  status: NodeStatus;
  reserved: Reserved;
  expected: boolean;
}

const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const MAX_ROSTER = 10_000;
const MAX_CACHE_KEYS = 4096;
/** Chunk keys indexed per node; a longer list is cut (the node's own bound should be lower). */
export const MAX_CHUNK_KEYS = 4096;
const MAX_KEY_LENGTH = 256;
/** Names of one announced snapshot (a node's API gives a snapshot at most one when it is taken). */
const MAX_SNAPSHOT_NAMES = 16;

/** The scheduler's answer to a heartbeat. */
export interface HeartbeatOutcome {
  status: NodeStatus;
  /** Sandboxes the node listed that were declared lost: it stops them. */
  fenced: string[];
}

/**
 * Nodes join by heartbeating and are known from then on. A heartbeat replaces the node's record
 * and roster and brings the sandbox bindings in line with the roster.
 */
export class Membership {
  private readonly expected: Map<string, string | undefined>;
  private readonly retentionMs: number;
  /** What placement decides on, kept in step with what this process writes. */
  readonly index: NodeIndex;
  /** Writes each roster's bindings; told of this process's assignments. */
  readonly rosters: RosterSync;

  /** @param watch this scheduler's own continuity (none: every silence counts, as in unit tests) */
  constructor(
    private readonly store: SchedulerStore,
    private readonly clock: Clock,
    private readonly settings: SchedulerSettings,
    private readonly watch?: Watch,
  ) {
    this.expected = new Map(settings.expectedNodes.map((n) => [n.nodeId, n.advertiseUrl]));
    this.retentionMs = nodeRetentionMs(settings);
    // Only another replica's writes need a quick reload; a store of this process alone is read
    // again only to forget what expired in it.
    const reloadMs = settings.heartbeatIntervalMs * (store.shared ? 1 / 4 : 60);
    this.index = new NodeIndex(store, clock, reloadMs);
    this.rosters = new RosterSync(store, settings);
  }

  /**
   * A node's status now, given its drain mark. A heartbeat counts from when it reached this
   * process, not only from its write: one still waiting for the store (or for the node's
   * previous heartbeat) shows the node alive.
   */
  statusOf(node: NodeRecord, drainedBootId: string | undefined, now = this.clock.now()): NodeStatus {
    const arrived = this.arrivedMs.get(node.nodeId);
    const heard =
      node.lastHeartbeatMs !== undefined && arrived !== undefined && arrived > node.lastHeartbeatMs
        ? { ...node, lastHeartbeatMs: arrived }
        : node;
    const watch = this.watch;
    return nodeStatus(
      heard,
      drainedBootId,
      now,
      this.settings.heartbeatIntervalMs,
      watch?.since,
      watch && ((ms) => watch.stalledSince(ms)),
    );
  }

  /** When each node's latest heartbeat reached this process. */
  private readonly arrivedMs = new Map<string, number>();
  /** Heartbeats of one node in this process, one at a time and in order of arrival. */
  private readonly beating = new Map<string, Promise<unknown>>();
  /** The latest heartbeat of each node waiting or being applied; older waiting ones are skipped. */
  private readonly newest = new Map<string, HeartbeatInput>();

  /**
   * Applies a node's heartbeat after those before it. A heartbeat still waiting when a newer one
   * of its node arrives is not applied (every heartbeat is the node's whole report, so the newer
   * one says all it said): under load, when a node re-sends after its call timed out, the work per
   * node stays one report instead of a queue that grows faster than the store drains it.
   */
  async heartbeat(hb: HeartbeatInput): Promise<HeartbeatOutcome> {
    checkHeartbeat(hb);
    if (this.expected.size > 0 && !this.expected.has(hb.nodeId))
      throw new DomainError(
        'unauthorized',
        `node ${hb.nodeId} is not in this scheduler's list of expected nodes`,
      );
    this.arrivedMs.set(hb.nodeId, this.clock.now());
    this.newest.set(hb.nodeId, hb);
    const turn = (this.beating.get(hb.nodeId) ?? Promise.resolve()).then(() =>
      this.newest.get(hb.nodeId) === hb ? this.apply(hb) : this.statusNow(hb.nodeId),
    );
    const settled = turn.catch(() => undefined);
    this.beating.set(hb.nodeId, settled);
    void settled.then(() => {
      if (this.beating.get(hb.nodeId) !== settled) return;
      this.beating.delete(hb.nodeId);
      this.newest.delete(hb.nodeId);
    });
    return turn;
  }

  /** The answer to a heartbeat a newer one superseded: the node's status as stored. */
  private async statusNow(nodeId: string): Promise<HeartbeatOutcome> {
    await this.index.ready();
    const node = this.index.node(nodeId);
    return { status: node ? this.statusOf(node, this.index.drainOf(nodeId)) : 'connecting', fenced: [] };
  }

  private async apply(hb: HeartbeatInput): Promise<HeartbeatOutcome> {
    const now = this.clock.now();
    const chunkKeys = hb.chunkKeys.slice(0, MAX_CHUNK_KEYS);
    const record: NodeRecord = {
      nodeId: hb.nodeId,
      advertiseUrl: hb.advertiseUrl,
      version: hb.version,
      clusterId: hb.clusterId,
      bootId: hb.bootId,
      reported: hb.status,
      capacity: hb.capacity,
      load: hb.load,
      cacheKeys: hb.cacheKeys,
      chunkDigest: digest(chunkKeys),
      ...(hb.p2p ? { p2p: hb.p2p } : {}),
    };
    await this.index.ready();
    const previous = this.index.node(hb.nodeId);
    const continued =
      previous?.bootId === hb.bootId &&
      previous.lastHeartbeatMs !== undefined &&
      now - previous.lastHeartbeatMs <= MISSED_INTERVALS * this.settings.heartbeatIntervalMs &&
      this.rosters.heardLastHere(hb.nodeId, previous.lastHeartbeatMs);
    const [fenced] = await Promise.all([
      this.rosters.sync(hb.nodeId, hb.roster, now, continued),
      previous?.chunkDigest !== record.chunkDigest
        ? this.store.putChunkKeys(hb.nodeId, chunkKeys, this.retentionMs)
        : undefined,
    ]);
    // Heard as it is written: a slow store must not make a fresh heartbeat look old.
    const heard = { ...record, lastHeartbeatMs: this.clock.now() };
    await this.store.putNode(heard, hb.roster, this.retentionMs);
    this.index.putNode(heard);
    this.rosters.heard(hb.nodeId, heard.lastHeartbeatMs);
    const drainedBootId = this.index.drainOf(hb.nodeId);
    await Promise.all([
      this.endReported(hb.nodeId, hb.roster),
      this.endAnnounced(hb.nodeId, hb.cacheKeys),
      this.keepDrain(hb, drainedBootId),
    ]);
    return { status: this.statusOf(heard, drainedBootId, heard.lastHeartbeatMs), fenced };
  }

  /**
   * A node that says it is draining (drained by the scheduler, it repeats so in every heartbeat)
   * gets its drain mark back when the store lost it.
   */
  private async keepDrain(hb: HeartbeatInput, drainedBootId: string | undefined): Promise<void> {
    if (hb.status === 'draining' && drainedBootId !== hb.bootId) await this.drain(hb.nodeId, hb.bootId);
  }

  /** Assigned reservations whose sandboxes the node's load now counts. */
  private async endReported(nodeId: string, roster: readonly RosterEntry[]): Promise<void> {
    const listed = new Set(roster.map((e) => e.sandboxId));
    const ended = this.index
      .reservationsOn(nodeId)
      .filter((r) => r.sandboxIds?.every((id) => listed.has(id)));
    for (const r of ended) this.index.takeReservation(r.id);
    await Promise.all(ended.map((r) => this.store.takeReservation(r.id)));
  }

  /** Announced captures the node's own report now lists. */
  private async endAnnounced(nodeId: string, cacheKeys: readonly string[]): Promise<void> {
    const ended = confirmed(nodeId, cacheKeys, this.index.announced(nodeId));
    if (!ended.length) return;
    this.index.deleteAnnounced(ended);
    await this.store.deleteAnnouncedCaptures(ended);
  }

  /**
   * A snapshot a node has just taken (its runtime cache holds it): placement counts it there at
   * once, before the node's heartbeats can list it (captures.ts says why).
   */
  async announceSnapshot(nodeId: string, snapshotId: string, names: readonly string[]): Promise<void> {
    if (!snapshotId) throw invalid('invalid snapshot_id: required');
    if (names.length > MAX_SNAPSHOT_NAMES || names.some((n) => !n))
      throw invalid(`invalid snapshot_names: at most ${MAX_SNAPSHOT_NAMES}, none empty`);
    const keys = snapshotKeys(snapshotId, names);
    const long = keys.find((k) => k.length > MAX_KEY_LENGTH);
    if (long !== undefined)
      throw invalid(
        `invalid snapshot id or name '${long.slice(0, 64)}': its key exceeds ${MAX_KEY_LENGTH} characters`,
      );
    if (!(await this.store.getNode(nodeId))) throw notFound(`node ${nodeId} is not registered`);
    const expiresMs = this.clock.now() + REPORT_GRACE_INTERVALS * this.settings.heartbeatIntervalMs;
    const captures = keys.map((key) => ({ nodeId, key, expiresMs }));
    await this.store.putAnnouncedCaptures(captures);
    this.index.putAnnounced(captures);
  }

  /** Drain: no more placements on the node's current boot. */
  async unregister(nodeId: string): Promise<void> {
    const node = await this.store.getNode(nodeId);
    if (!node) throw notFound(`node ${nodeId} is not registered`);
    await this.drain(nodeId, node.bootId);
  }

  private async drain(nodeId: string, bootId: string): Promise<void> {
    await this.store.putDrain(nodeId, bootId, this.retentionMs);
    this.index.putDrain(nodeId, bootId);
  }

  /** Every known node (and expected nodes not heard from yet), with its status now. */
  async views(): Promise<NodeView[]> {
    const [nodes, drains, reservations, announced] = await Promise.all([
      this.store.listNodes(),
      this.store.drains(),
      this.store.listReservations(),
      this.store.listAnnouncedCaptures(),
    ]);
    const reserved = reservedByNode(reservations);
    const now = this.clock.now();
    const views = nodes.map((node) => ({
      node: withAnnounced(node, announced),
      status: this.statusOf(node, drains.get(node.nodeId), now),
      reserved: reserved.get(node.nodeId) ?? NO_RESERVATION,
      expected: this.expected.has(node.nodeId),
    }));
    const known = new Set(nodes.map((n) => n.nodeId));
    for (const [nodeId, advertiseUrl] of this.expected) {
      if (!known.has(nodeId))
        views.push({
          node: placeholder(nodeId, advertiseUrl),
          status: 'connecting',
          reserved: NO_RESERVATION,
          expected: true,
        });
    }
    return views.sort((a, b) => a.node.nodeId.localeCompare(b.node.nodeId));
  }

  async view(nodeId: string): Promise<NodeView> {
    const v = (await this.views()).find((x) => x.node.nodeId === nodeId);
    if (!v) throw notFound(`node ${nodeId} is not registered`);
    return v;
  }
}

export function digest(keys: readonly string[]): string {
  return createHash('sha256')
    .update([...keys].sort().join('\n'))
    .digest('hex')
    .slice(0, 16);
}

function placeholder(nodeId: string, advertiseUrl = ''): NodeRecord {
  const zero = {
    allocatedCpu: 0,
    allocatedMemoryMib: 0,
    memoryUsedMib: 0,
    memoryFreeMib: 0,
    startsInFlight: 0,
    runningCount: 0,
    pausedCount: 0,
    cpuLoad1m: 0,
  };
  return {
    nodeId,
    advertiseUrl,
    version: '',
    clusterId: '',
    bootId: '',
    reported: 'ready',
    capacity: { cpuCount: 0, memoryTotalMib: 0, maxSandboxes: 0, maxConcurrentStarts: 0 },
    load: zero,
    cacheKeys: [],
    chunkDigest: digest([]),
  };
}

function checkHeartbeat(hb: HeartbeatInput): void {
  if (!NODE_ID.test(hb.nodeId))
    throw invalid(`invalid node_id '${hb.nodeId.slice(0, 64)}': letters, digits, '.', '_', '-', at most 128`);
  let url: URL;
  try {
    url = new URL(hb.advertiseUrl);
  } catch {
    throw invalid(`invalid advertise_url '${hb.advertiseUrl.slice(0, 200)}': not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw invalid('invalid advertise_url: must be http or https');
  if (!hb.bootId) throw invalid('invalid boot_id: required');
  const c = hb.capacity;
  if (!(c.cpuCount > 0 && c.memoryTotalMib > 0 && c.maxSandboxes > 0 && c.maxConcurrentStarts > 0))
    throw invalid(
      'invalid capacity: cpu_count, memory_total_mib, max_sandboxes and max_concurrent_starts must be > 0',
    );
  if (hb.roster.length > MAX_ROSTER) throw invalid(`invalid sandboxes: at most ${MAX_ROSTER} entries`);
  if (hb.cacheKeys.length > MAX_CACHE_KEYS) throw invalid(`invalid cache_keys: at most ${MAX_CACHE_KEYS}`);
  const long = [...hb.cacheKeys, ...hb.chunkKeys].find((k) => k.length === 0 || k.length > MAX_KEY_LENGTH);
  if (long !== undefined)
    throw invalid(`invalid key '${long.slice(0, 64)}': 1 to ${MAX_KEY_LENGTH} characters`);
  for (const e of hb.roster)
    if (!e.sandboxId || e.sandboxId.length > MAX_KEY_LENGTH)
      throw invalid('invalid sandboxes: every entry needs a sandbox_id');
}

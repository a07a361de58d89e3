import { randomUUID } from 'node:crypto';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { NodeStatus, SandboxEventType, type SandboxEventSchema } from '@agentenv/protocol/scheduler';
import { fromConnectError, type SchedulerClient } from '@agentenv/scheduler';
import type { Logger } from 'pino';
import { PAUSE_UPLOAD_STAGE } from '../orchestrator/index.js';
import { Latest } from './latest.js';
import type { SandboxEvent, SandboxEventLog } from './sandbox-events.js';
import {
  heartbeatRequest,
  type HostStats,
  type NodeIdentity,
  type P2pReport,
  type RosterSource,
} from './report.js';

export interface ClusterAgentDeps {
  client: SchedulerClient;
  identity: Omit<NodeIdentity, 'bootId'>;
  limits: { maxSandboxes: number; maxConcurrentStarts: number };
  records: () => readonly RosterSource[];
  host: () => Promise<HostStats>;
  cacheKeys: () => Promise<string[]>;
  p2p?: () => Promise<P2pReport>;
  events: SandboxEventLog;
  /** The orchestrator's finished stages, as they finish; returns how to stop listening. */
  stages?: (listener: (stage: string) => void) => () => void;
  /**
   * Stops a sandbox the cluster declared lost while this node was silent (its clients were told
   * it is gone), so that it never runs again.
   */
  fence: (sandboxId: string) => Promise<void>;
  logger: Logger;
  /** Until the scheduler names its own interval. */
  intervalMs?: number;
}

const EVENT_TYPE: Record<SandboxEvent['type'], SandboxEventType> = {
  created: SandboxEventType.CREATED,
  paused: SandboxEventType.PAUSED,
  resumed: SandboxEventType.RESUMED,
  killed: SandboxEventType.KILLED,
  exited: SandboxEventType.EXITED,
  forked: SandboxEventType.FORKED,
  snapshot: SandboxEventType.SNAPSHOT,
  lost: SandboxEventType.LOST,
};

/** Events waiting for the scheduler; beyond this the oldest are dropped (and counted). */
const MAX_PENDING_EVENTS = 10_000;
const EVENT_BATCH = 200;
/** How long a heartbeat waits for fresh host stats and cache keys before it sends the last ones. */
const GATHER_BUDGET_MS = 500;

/**
 * The node's membership in a cluster: a heartbeat every interval with its capacity, load, full
 * roster and cache keys (the first one registers it), its lifecycle events as they happen, and
 * on shutdown a drain before the sandboxes are paused and a last heartbeat after.
 */
export class ClusterAgent {
  private readonly bootId = randomUUID();
  private intervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private draining = false;
  private stopped = false;
  private joined = false;
  private lastError = '';
  private beating: Promise<void> | undefined;
  private readonly pending: MessageInitShape<typeof SandboxEventSchema>[] = [];
  private dropped = 0;
  /** Sandboxes being stopped because the scheduler fenced them. */
  private readonly fencing = new Set<string>();
  private flushing: Promise<void> | undefined;
  private readonly offEvents: () => void;
  private readonly hostNow: Latest<HostStats>;
  private readonly cacheKeysNow: Latest<string[]>;
  private readonly p2pNow: Latest<P2pReport> | undefined;

  constructor(private readonly d: ClusterAgentDeps) {
    this.intervalMs = d.intervalMs ?? 2000;
    this.hostNow = new Latest(d.host, GATHER_BUDGET_MS);
    this.cacheKeysNow = new Latest(d.cacheKeys, GATHER_BUDGET_MS);
    this.p2pNow = d.p2p && new Latest(d.p2p, GATHER_BUDGET_MS);
    const offEvents = d.events.onEvent((e) => this.queue(e));
    // A pause now in the shared repository: other nodes may resume it, so the scheduler hears it
    // at once rather than one interval later.
    const offStages = d.stages?.((stage) => stage === PAUSE_UPLOAD_STAGE && this.nudge());
    this.offEvents = () => {
      offEvents();
      offStages?.();
    };
  }

  /**
   * Heartbeats now and then every interval until stop(), counted from each heartbeat's start: a
   * slow answer must not stretch the gaps the scheduler judges the node's health by.
   */
  start(): void {
    const tick = () => {
      const t0 = Date.now();
      void this.beat().finally(() => {
        if (!this.stopped) this.timer = setTimeout(tick, Math.max(0, this.intervalMs - (Date.now() - t0)));
      });
    };
    tick();
  }

  /** Asks the scheduler for no more placements, and says so in the heartbeats from now on. */
  async drain(): Promise<void> {
    this.draining = true;
    try {
      await this.d.client.unregisterNode({ nodeId: this.d.identity.nodeId }, { timeoutMs: 5000 });
      this.d.logger.info('drained: the scheduler places nothing more on this node');
    } catch (err) {
      this.d.logger.warn({ err: fromConnectError(err).message }, 'unregistering from the scheduler failed');
    }
    await this.beatAfterCurrent();
  }

  /** Reports the last events and roster (the sandboxes paused by the shutdown), then stops. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.offEvents();
    await this.flush();
    await this.beatAfterCurrent();
  }

  /** A heartbeat soon, after the one under way (whose report may predate what changed). */
  private nudge(): void {
    if (this.stopped || !this.timer) return;
    void this.beatAfterCurrent();
  }

  /** A heartbeat of the state from now on: one under way was gathered before, so it goes first. */
  private beatAfterCurrent(): Promise<void> {
    return (this.beating ?? Promise.resolve()).then(() => this.beat());
  }

  /** One heartbeat (never two at once); failures are logged once per distinct error. */
  private beat(): Promise<void> {
    this.beating ??= this.sendHeartbeat().finally(() => (this.beating = undefined));
    return this.beating;
  }

  private async sendHeartbeat(): Promise<void> {
    try {
      const req = heartbeatRequest({
        identity: { ...this.d.identity, bootId: this.bootId },
        draining: this.draining,
        records: this.d.records(),
        host: await this.hostNow.get(),
        limits: this.d.limits,
        cacheKeys: await this.cacheKeysNow.get(),
        ...(this.p2pNow && { p2p: await this.p2pNow.get() }),
      });
      const res = await this.d.client.heartbeat(req, { timeoutMs: 5000 });
      if (res.intervalMs >= 100) this.intervalMs = res.intervalMs;
      for (const id of res.fencedSandboxIds) this.fence(id);
      // A drain holds for this boot: said in every heartbeat, it outlives a scheduler store that lost it.
      if (res.status === NodeStatus.DRAINING && !this.draining) {
        this.draining = true;
        this.d.logger.info('drained by the scheduler: the scheduler places nothing more on this node');
      }
      if (!this.joined || this.lastError)
        this.d.logger.info({ scheduler: 'ok' }, 'heartbeating to the cluster scheduler');
      this.joined = true;
      this.lastError = '';
      if (this.pending.length) void this.flush();
    } catch (err) {
      const e = fromConnectError(err);
      if (e.message !== this.lastError)
        this.d.logger.warn({ kind: e.kind, err: e.message }, 'heartbeat to the scheduler failed');
      this.lastError = e.message;
    }
  }

  /** Stops a fenced sandbox once, however many heartbeats name it meanwhile. */
  private fence(sandboxId: string): void {
    if (this.fencing.has(sandboxId)) return;
    this.fencing.add(sandboxId);
    this.d.logger.warn(
      { sandboxId },
      'the cluster declared this sandbox lost while the node was silent: stopping it',
    );
    void this.d
      .fence(sandboxId)
      .catch((err: unknown) => this.d.logger.warn({ sandboxId, err }, 'stopping a fenced sandbox failed'))
      .finally(() => this.fencing.delete(sandboxId));
  }

  private queue(e: SandboxEvent): void {
    // A new snapshot is in this node's cache now: advertise it at once. The gateway has reported
    // it already, and the scheduler holds that report only until this node's own one lists it.
    if (e.type === 'snapshot') this.nudge();
    this.pending.push({
      sandboxId: e.sandboxID,
      nodeId: e.nodeID,
      type: EVENT_TYPE[e.type],
      reason: e.reason,
      time: timestampFromDate(new Date(e.timestamp)),
      details: e.details,
    });
    if (this.pending.length > MAX_PENDING_EVENTS) {
      this.pending.shift();
      if (this.dropped++ % 1000 === 0)
        this.d.logger.warn({ dropped: this.dropped }, 'scheduler unreachable: dropping old lifecycle events');
    }
    void this.flush();
  }

  /** Sends queued events in order; what fails stays queued for the next heartbeat to retry. */
  private flush(): Promise<void> {
    this.flushing ??= (async () => {
      while (this.pending.length) {
        const batch = this.pending.slice(0, EVENT_BATCH);
        try {
          await this.d.client.reportSandboxEvent({ events: batch }, { timeoutMs: 5000 });
        } catch (err) {
          const e = fromConnectError(err);
          if (e.kind !== 'invalid') return;
          // A batch the scheduler refuses as malformed would be refused forever.
          this.d.logger.warn(
            { err: e.message, events: batch.length },
            'the scheduler refused lifecycle events',
          );
        }
        // Sent (or refused for good); the queue may have lost its oldest meanwhile, never reordered.
        const done = new Set(batch);
        while (this.pending.length && done.has(this.pending[0]!)) this.pending.shift();
      }
    })().finally(() => (this.flushing = undefined));
    return this.flushing;
  }
}

import { randomBytes } from 'node:crypto';
import { startCacheKeys } from '@agentenv/protocol/scheduler';
import { Batches } from '../store/batches.js';
import type { Clock } from '../clock.js';
import { invalid, notFound, DomainError } from '@agentenv/common';
import type { Membership } from '../membership/membership.js';
import type { Binding, NodeRecord, NodeStatus, PlacementKind, Reservation, Resources } from '../model.js';
import type { PlacementRequest } from './scoring/candidate.js';
import { place } from './scoring/place.js';
import { REPORT_GRACE_INTERVALS, type SchedulerSettings } from '../settings.js';
import type { SchedulerStore } from '../store/store.js';

export interface ScheduleInput {
  kind: PlacementKind;
  templateId?: string;
  snapshotId?: string;
  pauseId?: string;
  cacheKeys: string[];
  resources?: Resources;
  sandboxId?: string;
  preferNodeId?: string;
  excludeNodeIds: string[];
  count: number;
}

export interface Placed {
  nodeId: string;
  advertiseUrl: string;
  reservationId: string;
  expiresMs: number;
  localityHit: boolean;
}

export interface AssignmentInput {
  reservationId?: string;
  nodeId: string;
  sandboxIds: string[];
  templateId?: string;
  resources?: Resources;
}

export interface PauseInput {
  nodeId: string;
  sandboxId: string;
  /** In the shared repository already. */
  stored: boolean;
}

export interface Located {
  nodeId: string;
  advertiseUrl: string;
  nodeStatus: NodeStatus;
  binding: Binding;
}

export type PlacementOutcome = 'placed' | 'capacity' | 'unavailable';

/** Told about every placement decision (the metrics module counts them). */
export interface PlacementObserver {
  placement(kind: PlacementKind, outcome: PlacementOutcome, localityHit: boolean): void;
}

const MAX_COUNT = 1024;
/** Nodes sampled per best-of-K choice, so that enough of them pass the filters. */
const SAMPLE_FROM = 8;
/** Seconds a client should wait after `capacity`: about one start's time. */
const RETRY_AFTER_SECS = 1;

/**
 * Placement with reservations: Schedule decides on the nodes' last reports plus everything
 * reserved and not yet assigned, and reserves its choice before answering, so a burst of
 * Schedule calls spreads instead of landing on the node that looked emptiest. A decision reads
 * the membership's in-process index (node-index.ts), not the store, and counts its reservation
 * there at once, so the next decision sees it without waiting; the reservations are written to
 * the store in batches, each answered once its batch is stored. Replicas sharing a store decide
 * independently, so two of them may pick one node for concurrent calls; the reservations they
 * write hold for every later decision of the other once it reloads its index.
 */
export class Reservations {
  private readonly reservations: Batches<Reservation>;

  constructor(
    private readonly store: SchedulerStore,
    private readonly clock: Clock,
    private readonly settings: SchedulerSettings,
    private readonly membership: Membership,
    private readonly observer?: PlacementObserver,
    private readonly random: () => number = Math.random,
  ) {
    this.reservations = new Batches((rs) => store.putReservations(rs));
  }

  private get index() {
    return this.membership.index;
  }

  async schedule(input: ScheduleInput): Promise<Placed> {
    const count = input.count || 1;
    if (!Number.isInteger(count) || count < 1 || count > MAX_COUNT)
      throw invalid(`invalid count: 1 to ${MAX_COUNT}`);
    const resources =
      input.resources?.cpuCount && input.resources.memoryMib
        ? input.resources
        : this.settings.defaultResources;
    let preferNodeId = input.preferNodeId;
    let pauseId = input.pauseId;
    if (input.kind === 'resume' && input.sandboxId) {
      const bound = (await this.store.getBindings([input.sandboxId])).get(input.sandboxId);
      preferNodeId ??= bound?.nodeId;
      pauseId ??= bound?.pauseId;
    }
    // The request's own keys, and those of the captures its ids name (as nodes advertise them).
    const keys = new Set([
      ...input.cacheKeys,
      ...startCacheKeys({
        ...(input.templateId ? { templateId: input.templateId } : {}),
        ...(input.snapshotId ? { snapshotId: input.snapshotId } : {}),
        ...(pauseId ? { pauseId } : {}),
      }),
    ]);
    const req: PlacementRequest = {
      resources,
      count,
      cacheKeys: [...keys],
      ...(preferNodeId ? { preferNodeId } : {}),
      excludeNodeIds: input.excludeNodeIds,
    };
    await this.index.ready();
    return this.decide(input.kind, req);
  }

  /** Decides and reserves in one synchronous step, then waits for the reservation's write. */
  private async decide(kind: PlacementKind, req: PlacementRequest): Promise<Placed> {
    const { resources, count } = req;
    const now = this.clock.now();
    const result = this.choose(req, (n, drained) => this.membership.statusOf(n, drained, now));
    if (!result.ok) {
      this.observer?.placement(kind, result.kind, false);
      throw new DomainError(
        result.kind,
        result.message,
        result.kind === 'capacity' ? RETRY_AFTER_SECS : undefined,
      );
    }
    const reservation: Reservation = {
      id: `rsv_${randomBytes(9).toString('hex')}`,
      nodeId: result.nodeId,
      resources,
      count,
      createdMs: now,
      expiresMs: now + this.settings.reservationTtlMs,
    };
    this.index.putReservations([reservation]);
    try {
      await this.reservations.put(reservation);
      this.index.saved(reservation.id);
    } catch (err) {
      this.index.takeReservation(reservation.id);
      throw err;
    }
    this.observer?.placement(kind, 'placed', result.localityHit);
    const node = this.index.node(result.nodeId)!;
    return {
      nodeId: node.nodeId,
      advertiseUrl: node.advertiseUrl,
      reservationId: reservation.id,
      expiresMs: reservation.expiresMs,
      localityHit: result.localityHit,
    };
  }

  /**
   * Places on a sample of the nodes (node-index.ts) when the cluster is big, so a decision costs
   * the same at 10,000 nodes as at 50; on all of them when the sample has no node with room, which
   * also makes a refusal name its reasons as before.
   */
  private choose(req: PlacementRequest, statusOf: (n: NodeRecord, drained?: string) => NodeStatus) {
    const { policy } = this.settings;
    const k = Math.max(1, policy.bestOfK);
    if (this.index.size > SAMPLE_FROM * k) {
      const sampled = this.index.sample(req, SAMPLE_FROM * k, SAMPLE_FROM * k, statusOf, this.random);
      const result = place(sampled, req, policy, this.random);
      if (result.ok) return result;
    }
    return place(this.index.candidates(statusOf), req, policy, this.random);
  }

  /**
   * Binds started sandboxes to their node (until its roster takes over); the reservation ends
   * when the node's roster lists them, at once when a roster already has (one sent during their
   * start): the node's load counts them then, and the reservation would count them twice.
   */
  async recordAssignment(a: AssignmentInput): Promise<void> {
    if (a.sandboxIds.length === 0 || a.sandboxIds.length > MAX_COUNT)
      throw invalid(`invalid sandbox_ids: 1 to ${MAX_COUNT}`);
    if (a.sandboxIds.some((id) => !id || id.length > 256))
      throw invalid('invalid sandbox_ids: empty or too long');
    await this.index.ready();
    if (!this.index.node(a.nodeId) && !(await this.store.getNode(a.nodeId)))
      throw notFound(`node ${a.nodeId} is not registered`);
    const reservation = a.reservationId ? await this.take(a.reservationId) : undefined;
    const resources = a.resources?.cpuCount
      ? a.resources
      : (reservation?.resources ?? this.settings.defaultResources);
    const now = this.clock.now();
    const known = await this.store.getBindings(a.sandboxIds);
    const reported = (id: string) => {
      const b = known.get(id);
      return b?.source === 'roster' && b.nodeId === a.nodeId;
    };
    if (reservation && !a.sandboxIds.every(reported)) {
      // Held until the node's next rosters list the sandboxes (membership ends it then).
      const expiresMs = Math.min(
        reservation.expiresMs,
        now + REPORT_GRACE_INTERVALS * this.settings.heartbeatIntervalMs,
      );
      const held = { ...reservation, nodeId: a.nodeId, sandboxIds: a.sandboxIds, expiresMs };
      this.index.putReservations([held]);
      await this.reservations.put(held);
      this.index.saved(held.id);
    }
    const bindings: Binding[] = a.sandboxIds
      .filter((id) => !reported(id))
      .map((sandboxId) => ({
        sandboxId,
        nodeId: a.nodeId,
        state: 'running',
        templateId: a.templateId ?? '',
        cpuCount: resources.cpuCount,
        memoryMib: resources.memoryMib,
        source: 'assignment',
        updatedMs: now,
      }));
    await this.store.putBindings(bindings, this.settings.bindingTtlMs);
    this.membership.rosters.assignedTo(
      a.nodeId,
      bindings.map((b) => b.sandboxId),
    );
  }

  /**
   * A pause a node answered: the sandbox is paused on it from now on, before the node's roster
   * says so (see reconcileRoster). A sandbox the scheduler does not know is bound to the node.
   */
  async recordPause(p: PauseInput): Promise<void> {
    if (!p.sandboxId || p.sandboxId.length > 256) throw invalid('invalid sandbox_id: empty or too long');
    if (!(await this.store.getNode(p.nodeId))) throw notFound(`node ${p.nodeId} is not registered`);
    const b = (await this.store.getBindings([p.sandboxId])).get(p.sandboxId);
    const binding = this.reported(b, p, { state: 'paused', ...(p.stored ? {} : { pauseLocalOnly: true }) });
    await this.store.putBindings([binding], this.settings.bindingTtlMs);
    this.membership.rosters.recheck(p.nodeId, [p.sandboxId]);
  }

  /**
   * A sandbox its node reports lost (it came back from a crash without the sandbox's processes):
   * lost on that node, whatever the binding said before — the node's heartbeats may never have
   * said it was running again (resumed just before the crash), and its roster no longer lists it,
   * which would otherwise drop the binding and leave a 404 instead of a 410 with the reason. A
   * sandbox bound to another node meanwhile, or lost already, stays as it is.
   */
  async recordLoss(p: { nodeId: string; sandboxId: string; reason: string }): Promise<void> {
    const b = (await this.store.getBindings([p.sandboxId])).get(p.sandboxId);
    if (b && (b.nodeId !== p.nodeId || b.state === 'lost')) return;
    const binding = this.reported(b, p, { state: 'lost', lostReason: p.reason });
    await this.store.putBindings([binding], this.settings.lostRetentionMs);
  }

  /**
   * A binding written from what a gateway or node reported rather than from a roster: what was
   * known of the sandbox (its template and resources, else the defaults), on `nodeId`, in `now`'s
   * state, with the flags of its previous state dropped.
   */
  private reported(
    b: Binding | undefined,
    at: { sandboxId: string; nodeId: string },
    now: Pick<Binding, 'state' | 'pauseLocalOnly' | 'lostReason'>,
  ): Binding {
    const { pauseLocalOnly: _l, lostReason: _r, ...rest }: Partial<Binding> = b ?? {};
    return {
      templateId: '',
      ...this.settings.defaultResources,
      ...rest,
      sandboxId: at.sandboxId,
      nodeId: at.nodeId,
      ...now,
      source: 'assignment',
      updatedMs: this.clock.now(),
    };
  }

  /** Gives a reservation back (its start failed); unknown or expired ones are ignored. */
  async release(reservationId: string): Promise<void> {
    if (!reservationId) throw invalid('invalid reservation_id: required');
    await this.take(reservationId);
  }

  private take(reservationId: string): Promise<Reservation | undefined> {
    this.index.takeReservation(reservationId);
    return this.store.takeReservation(reservationId);
  }

  async lookup(sandboxId: string): Promise<Located> {
    if (!sandboxId) throw invalid('invalid sandbox_id: required');
    const binding = (await this.store.getBindings([sandboxId])).get(sandboxId);
    if (!binding) throw this.unknown(`sandbox ${sandboxId} is not known to the scheduler`);
    await this.index.ready();
    const node = this.index.node(binding.nodeId) ?? (await this.store.getNode(binding.nodeId));
    if (!node)
      throw this.unknown(`sandbox ${sandboxId} is bound to node ${binding.nodeId}, which is not registered`);
    return {
      nodeId: node.nodeId,
      advertiseUrl: node.advertiseUrl,
      nodeStatus: this.membership.statusOf(node, this.index.drainOf(node.nodeId)),
      binding,
    };
  }

  /**
   * 404 for what the store does not hold, but a retryable 503 while the nodes' rosters may still
   * be writing back what a store that just came back lost (or never got: an assignment recorded
   * while it was down), so a client never hears "not found" of a sandbox that exists.
   */
  private unknown(message: string): DomainError {
    const back = this.store.reconnectedAtMs();
    const sinceMs = back === undefined ? Infinity : this.clock.now() - back;
    if (sinceMs >= REPORT_GRACE_INTERVALS * this.settings.heartbeatIntervalMs) return notFound(message);
    return new DomainError(
      'unavailable',
      `${message} yet: its store came back ${Math.round(sinceMs)} ms ago and the nodes' rosters are still arriving; retry`,
      1,
    );
  }
}

import { create } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import * as pb from '@agentenv/protocol/scheduler';
import type { ChunkPeers } from '../chunks/chunk-peers.js';
import { invalid } from '@agentenv/common';
import type { EventLog } from '../events.js';
import type { Membership } from '../membership/membership.js';
import type { Reservations } from '../schedule/reservations.js';
import type { SchedulerStore } from '../store/store.js';
import {
  eventIn,
  eventOut,
  heartbeatIn,
  lookupOut,
  nodeOut,
  nodeStatusOut,
  scheduleIn,
  scheduleOut,
} from './convert.js';
import { toConnectError } from './errors.js';

export interface ServiceDeps {
  store: SchedulerStore;
  membership: Membership;
  placements: Reservations;
  events: EventLog;
  chunkPeers: ChunkPeers;
  heartbeatIntervalMs: number;
  /** Told about every heartbeat (the chunk index and metrics listen). */
  onHeartbeat?: (nodeId: string, ok: boolean) => void;
}

/** Wraps each handler so domain errors become Connect errors in one place. */
function mapped<A extends unknown[], R>(fn: (...a: A) => Promise<R>): (...a: A) => Promise<R> {
  return async (...a) => {
    try {
      return await fn(...a);
    } catch (err) {
      throw toConnectError(err);
    }
  };
}

/** scheduler.v1.SchedulerService over the domain services; conversion only, no decisions. */
// eslint-disable-next-line max-lines-per-function -- declarative: one RPC handler after another
export function schedulerService(d: ServiceDeps): ServiceImpl<typeof pb.SchedulerService> {
  return {
    schedule: mapped(async (req) => scheduleOut(await d.placements.schedule(scheduleIn(req)))),

    lookupNode: mapped(async (req) => lookupOut(await d.placements.lookup(req.sandboxId))),

    recordAssignment: mapped(async (req) => {
      await d.placements.recordAssignment({
        ...(req.reservationId ? { reservationId: req.reservationId } : {}),
        nodeId: req.nodeId,
        sandboxIds: req.sandboxIds,
        ...(req.templateId ? { templateId: req.templateId } : {}),
        ...(req.resources
          ? { resources: { cpuCount: req.resources.cpuCount, memoryMib: req.resources.memoryMib } }
          : {}),
      });
      return create(pb.RecordAssignmentResponseSchema);
    }),

    recordPause: mapped(async (req) => {
      await d.placements.recordPause({ nodeId: req.nodeId, sandboxId: req.sandboxId, stored: req.stored });
      return create(pb.RecordPauseResponseSchema);
    }),

    releaseReservation: mapped(async (req) => {
      await d.placements.release(req.reservationId);
      return create(pb.ReleaseReservationResponseSchema);
    }),

    recordCapture: mapped(async (req) => {
      await d.membership.announceSnapshot(req.nodeId, req.snapshotId, req.snapshotNames);
      return create(pb.RecordCaptureResponseSchema);
    }),

    heartbeat: mapped(async (req) => {
      try {
        const input = heartbeatIn(req);
        const { status, fenced } = await d.membership.heartbeat(input);
        d.onHeartbeat?.(input.nodeId, true);
        return create(pb.HeartbeatResponseSchema, {
          intervalMs: d.heartbeatIntervalMs,
          status: nodeStatusOut(status),
          fencedSandboxIds: fenced,
        });
      } catch (err) {
        d.onHeartbeat?.(req.nodeId, false);
        throw err;
      }
    }),

    listNodes: mapped(async (req) => {
      const views = await d.membership.views();
      const nodes = await Promise.all(
        views.map(async (v) =>
          nodeOut(v, req.includeSandboxes ? await d.store.getRoster(v.node.nodeId) : undefined),
        ),
      );
      return create(pb.ListNodesResponseSchema, { nodes });
    }),

    getNode: mapped(async (req) => {
      if (!req.nodeId) throw invalid('invalid node_id: required');
      const v = await d.membership.view(req.nodeId);
      return create(pb.GetNodeResponseSchema, { node: nodeOut(v, await d.store.getRoster(req.nodeId)) });
    }),

    unregisterNode: mapped(async (req) => {
      if (!req.nodeId) throw invalid('invalid node_id: required');
      await d.membership.unregister(req.nodeId);
      return create(pb.UnregisterNodeResponseSchema);
    }),

    reportSandboxEvent: mapped(async (req) => {
      const events = req.events.map(eventIn);
      await d.events.report(events);
      for (const e of events)
        if (e.type === 'lost')
          await d.placements.recordLoss({ nodeId: e.nodeId, sandboxId: e.sandboxId, reason: e.reason });
      return create(pb.ReportSandboxEventResponseSchema);
    }),

    listSandboxEvents: mapped(async (req) =>
      create(pb.ListSandboxEventsResponseSchema, {
        events: (await d.events.list(req.sandboxId, req.limit)).map(eventOut),
      }),
    ),

    async *watchEvents(req, ctx) {
      try {
        const filter = {
          ...(req.sandboxId ? { sandboxId: req.sandboxId } : {}),
          ...(req.nodeId ? { nodeId: req.nodeId } : {}),
        };
        for await (const e of d.events.watch(filter, ctx.signal)) {
          yield create(pb.WatchEventsResponseSchema, { event: eventOut(e) });
        }
      } catch (err) {
        throw toConnectError(err);
      }
    },

    findChunkPeers: mapped(async (req) => {
      const results = await d.chunkPeers.find(req.keys, req.excludeNodeId, req.maxPeers);
      return create(pb.FindChunkPeersResponseSchema, {
        results: results.map((r) => ({
          key: r.key,
          peers: r.peers.map((p) => ({ nodeId: p.nodeId, endpoint: p.endpoint })),
        })),
      });
    }),
  };
}

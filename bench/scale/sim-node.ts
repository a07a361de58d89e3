/**
 * A simulated node: it builds its heartbeat with the node agent's own `heartbeatRequest` (full
 * roster, capacity, load, cache keys) and reports lifecycle events the way the agent does (queued
 * as they happen, one batch of at most 200 in flight per node). It runs no sandboxes: a placement
 * that lands on it adds one to its roster (`created`) and retires its oldest (`killed`), so the
 * roster stays at its size and changes with every placement, as a busy node's does.
 */
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { captureKey, SandboxEventType } from '@agentenv/protocol/scheduler';
import type { SchedulerClient } from '@agentenv/scheduler';
import { heartbeatRequest, type RosterSource } from '../../packages/node/src/cluster/report.js';

export interface SimShape {
  rosterSize: number;
  /** Templates in the cluster; each node holds a few of them (its cache keys). */
  templates: number;
  templatesPerNode: number;
}

const EVENT_BATCH = 200;
const LIMITS = { maxSandboxes: 100_000, maxConcurrentStarts: 100_000 };
const HOST = { cpuCount: 64, memoryTotalMib: 1 << 20, memoryAvailableMib: 1 << 19, loadAvg1m: 4 };

export const templateId = (i: number) => `tpl-${i}`;

interface QueuedEvent {
  sandboxId: string;
  nodeId: string;
  type: SandboxEventType;
  reason: string;
  time: ReturnType<typeof timestampFromDate>;
  details: Record<string, string>;
}

export class SimNode {
  readonly bootId = `boot-${Math.random().toString(36).slice(2)}`;
  private readonly records: RosterSource[] = [];
  private readonly cacheKeys: string[];
  private readonly pending: QueuedEvent[] = [];
  private flushing: Promise<void> | undefined;
  private seq = 0;

  constructor(
    readonly nodeId: string,
    index: number,
    private readonly shape: SimShape,
    private readonly client: SchedulerClient,
  ) {
    for (let i = 0; i < shape.rosterSize; i++)
      this.records.push(this.record(`${nodeId}-s${this.seq++}`, templateId((index + i) % shape.templates)));
    this.cacheKeys = [];
    for (let i = 0; i < shape.templatesPerNode; i++)
      this.cacheKeys.push(captureKey.template(templateId((index * 7 + i) % shape.templates)));
  }

  private record(sandboxId: string, template: string): RosterSource {
    return { sandboxId, state: 'running', templateId: template, cpuCount: 1, memoryMB: 512 };
  }

  heartbeat() {
    return heartbeatRequest({
      identity: {
        nodeId: this.nodeId,
        clusterId: 'scale',
        advertiseUrl: `http://127.0.0.1:9/${this.nodeId}`,
        version: 'sim',
        bootId: this.bootId,
      },
      draining: false,
      records: this.records,
      host: HOST,
      limits: LIMITS,
      cacheKeys: this.cacheKeys,
    });
  }

  /** A sandbox placed here has started: it joins the roster, the oldest one is killed. */
  started(sandboxId: string, template: string): void {
    this.records.push(this.record(sandboxId, template));
    this.queue(sandboxId, SandboxEventType.CREATED);
    if (this.records.length > this.shape.rosterSize) {
      const old = this.records.shift()!;
      this.queue(old.sandboxId, SandboxEventType.KILLED);
    }
  }

  private queue(sandboxId: string, type: SandboxEventType): void {
    this.pending.push({
      sandboxId,
      nodeId: this.nodeId,
      type,
      reason: type === SandboxEventType.KILLED ? 'killed by the client' : '',
      time: timestampFromDate(new Date()),
      details: {},
    });
    void this.flush();
  }

  private flush(): Promise<void> {
    this.flushing ??= (async () => {
      while (this.pending.length) {
        const batch = this.pending.splice(0, EVENT_BATCH);
        await this.client.reportSandboxEvent({ events: batch }).catch(() => undefined);
      }
    })().finally(() => (this.flushing = undefined));
    return this.flushing;
  }
}

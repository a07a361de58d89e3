import type { MessageInitShape } from '@bufbuild/protobuf';
import {
  NodeStatus,
  type HeartbeatRequestSchema,
  type SandboxSummarySchema,
} from '@agentenv/protocol/scheduler';
import { createSchedulerClient, type SchedulerClient } from '@agentenv/scheduler';

type Summary = MessageInitShape<typeof SandboxSummarySchema>;
type Heartbeat = MessageInitShape<typeof HeartbeatRequestSchema>;
/** A heartbeat's fields, to override some of them. */
type HeartbeatFields = Exclude<Heartbeat, { $typeName: string }>;

export interface FakeNodeOptions {
  schedulerUrl: string;
  apiKey: string;
  nodeId: string;
  intervalMs: number;
  /** Overrides of the heartbeat (capacity, load, cache keys, …). */
  heartbeat?: Partial<HeartbeatFields>;
}

/**
 * A stand-in node for scheduler tests: it heartbeats like the real node agent (same RPC, full
 * roster) without running sandboxes. Its roster and load are set by the test.
 */
export class FakeNode {
  readonly client: SchedulerClient;
  roster: Summary[] = [];
  private timer: NodeJS.Timeout | undefined;
  readonly bootId = `boot-${Math.random().toString(36).slice(2)}`;

  constructor(readonly o: FakeNodeOptions) {
    this.client = createSchedulerClient({ url: o.schedulerUrl, apiKey: o.apiKey });
  }

  get nodeId(): string {
    return this.o.nodeId;
  }

  request(): HeartbeatFields {
    return {
      nodeId: this.o.nodeId,
      advertiseUrl: `http://127.0.0.1:1/${this.o.nodeId}`,
      version: 'fake',
      clusterId: 'test',
      bootId: this.bootId,
      status: NodeStatus.READY,
      capacity: { cpuCount: 8, memoryTotalMib: 32_768, maxSandboxes: 20, maxConcurrentStarts: 16 },
      load: { memoryFreeMib: 30_000, memoryUsedMib: 2000, runningCount: this.roster.length },
      sandboxes: this.roster,
      ...this.o.heartbeat,
    };
  }

  beat() {
    return this.client.heartbeat(this.request());
  }

  /** Heartbeats now and then every interval (errors are ignored, as a node retries). */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat().catch(() => undefined), this.o.intervalMs);
  }

  /** Goes silent, as a crashed node does. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

import { pino, type Logger } from 'pino';
import { DEFAULT_RESOURCES } from '@agentenv/node';
import {
  createSourceChain,
  defaultConfig,
  Orchestrator,
  SandboxWarmPool,
  type AdmissionMeasure,
  type CreateSandboxInput,
  type HostMemory,
  type LifecycleEvent,
  type LifecycleObserver,
  type NodeConfig,
  type SandboxRecord,
} from '@agentenv/node/server';
import { FakeCaptureDirs } from './captures.js';
import { FakeClock } from './clock.js';
import { FakeDisk } from './disk.js';
import { FakeDriver } from './driver.js';
import { FakeEnvd } from './envd.js';
import { FakePauses, FakePauseStorage } from './pauses.js';
import { MemoryRecordStore } from './records.js';
import { FakeSlots } from './slots.js';
import { FakeSnapshotCatalog } from './snapshots.js';
import { fakeImages, FakeTemplates } from './templates.js';

export interface FakeNodeOptions {
  /** The shared repository's pauses: give another node's to share them (takeover). */
  storage?: FakePauseStorage;
  /** The installation's API key (`AENV_API_KEY`), which seals stored pauses; none: the node secret does. */
  apiKey?: string;
  clock?: FakeClock;
  maxSandboxes?: number;
  maxConcurrentStarts?: number;
  /** `[orchestrator] idle_freeze_secs` (the default config's unless given; 0: off). */
  idleFreezeSecs?: number;
  /** `[orchestrator] idle_freeze_cpu_pct` (the default config's unless given; 0: requests alone). */
  idleFreezeCpuPct?: number;
  /** Warm sandboxes per template (0: off, the default here). */
  poolSize?: number;
  forkMaxChildren?: number;
  /** Network slots available (then acquire fails EXHAUSTED). */
  slotCapacity?: number;
  /** The host-side address of every slot (127.0.0.1 to put a real server behind a sandbox). */
  hostAddress?: string;
  /** What the host reports as available memory (bytes), for the warm pool. */
  memoryBytes?: number;
  /** The host's total memory: given, admission counts measured memory and pressure pauses. */
  hostMemoryBytes?: number;
  memoryLimitMb?: number;
  /** Extra admission measures. */
  admission?: readonly AdmissionMeasure[];
}

/** Lifecycle reports kept for tests to read. */
export class RecordingObserver implements LifecycleObserver {
  readonly stages: { name: string; ms: number }[] = [];
  readonly failures: string[] = [];
  readonly events: LifecycleEvent[] = [];

  stage(name: string, ms: number): void {
    this.stages.push({ name, ms });
  }
  failed(name: string): void {
    this.failures.push(name);
  }
  event(e: LifecycleEvent): void {
    this.events.push(e);
  }
  /** `type:reason` of each event of a sandbox, in order. */
  of(sandboxId: string): string[] {
    return this.events.filter((e) => e.sandboxId === sandboxId).map((e) => `${e.type}:${e.reason}`);
  }
}

/** What survives a restart of a fake node: its disk, records and the repository. */
interface Durable {
  disk: FakeDisk;
  store: MemoryRecordStore;
  storage: FakePauseStorage;
  clock: FakeClock;
  owner: string;
}

let nodes = 0;

/**
 * A node made of the real orchestrator (and warm pool and source chain) over fakes: a driver
 * that keeps sandboxes as objects, network slots as numbers, records in memory, a disk of
 * capture directories, a shared repository of pauses and claims, a snapshot catalogue, envd,
 * and a clock that moves when the test says. Everything runs in memory, in milliseconds.
 */
export class FakeNode {
  readonly clock: FakeClock;
  readonly disk: FakeDisk;
  readonly store: MemoryRecordStore;
  readonly storage: FakePauseStorage;
  readonly driver: FakeDriver;
  readonly slots: FakeSlots;
  readonly captures: FakeCaptureDirs;
  readonly pauses: FakePauses;
  readonly snapshots: FakeSnapshotCatalog;
  readonly envd = new FakeEnvd();
  readonly templates: FakeTemplates;
  readonly memory: HostMemory & { bytes: number };
  /** What the orchestrator reported; `observe()` adds observers (the node's metrics). */
  readonly observer = new RecordingObserver();
  private readonly observers: LifecycleObserver[] = [this.observer];
  readonly config: NodeConfig;
  readonly logger: Logger = pino({ level: 'silent' });
  readonly pool: SandboxWarmPool;
  readonly orchestrator: Orchestrator;
  private readonly durable: Durable;

  constructor(
    readonly opts: FakeNodeOptions = {},
    durable?: Durable,
  ) {
    this.durable = durable ?? {
      disk: new FakeDisk(),
      store: new MemoryRecordStore(),
      storage: opts.storage ?? new FakePauseStorage(),
      clock: opts.clock ?? new FakeClock(),
      owner: `node-${++nodes}`,
    };
    ({ disk: this.disk, store: this.store, storage: this.storage, clock: this.clock } = this.durable);
    const now = () => this.clock.now();
    this.driver = new FakeDriver(this.disk, now);
    this.slots = new FakeSlots({
      ...(opts.slotCapacity !== undefined ? { capacity: opts.slotCapacity } : {}),
      ...(opts.hostAddress ? { hostAddress: () => opts.hostAddress! } : {}),
    });
    this.captures = new FakeCaptureDirs(this.disk);
    this.pauses = new FakePauses(this.storage, this.disk, this.durable.owner);
    this.snapshots = new FakeSnapshotCatalog(this.disk, now);
    this.templates = new FakeTemplates(this.disk);
    this.memory = { bytes: opts.memoryBytes ?? 64 * 2 ** 30, availableBytes: async () => this.memory.bytes };
    this.config = fakeConfig(opts);
    this.pool = new SandboxWarmPool({
      size: this.config.pool.size,
      driver: this.driver,
      slots: this.slots,
      memory: this.memory,
      captures: this.captures,
      envd: this.envd.connect,
      logger: this.logger,
    });
    this.orchestrator = new Orchestrator({
      config: this.config,
      store: this.store,
      driver: this.driver,
      sources: createSourceChain({
        snapshots: this.snapshots,
        templates: [this.templates],
        cold: fakeImages,
      }),
      slots: this.slots,
      envd: this.envd.connect,
      logger: this.logger,
      nodeSecret: 'fake-node-secret',
      captures: this.captures,
      observer: {
        stage: (name, ms) => this.observers.forEach((o) => o.stage(name, ms)),
        failed: (name) => this.observers.forEach((o) => o.failed(name)),
        event: (e) => this.observers.forEach((o) => o.event(e)),
      },
      snapshots: this.snapshots,
      pauses: this.pauses,
      pool: this.pool,
      volumes: { resolve: (mounts) => mounts.map((m) => ({ ...m, hostPath: `/fake/volumes/${m.name}` })) },
      clock: this.clock,
      ...(opts.admission ? { admission: opts.admission } : {}),
      ...(opts.hostMemoryBytes ? { memory: { host: this.memory, totalBytes: opts.hostMemoryBytes } } : {}),
    });
  }

  observe(o: LifecycleObserver): void {
    this.observers.push(o);
  }

  /**
   * The node's process died and a new one starts on the same disk, records and repository: the
   * runtime's sandboxes are gone (a starting node reclaims them). recover() is the caller's.
   */
  restart(): FakeNode {
    this.driver.reclaimAll();
    return new FakeNode(this.opts, this.durable);
  }

  /** Another node that shares this one's repository (pauses and claims), with its own disk. */
  peer(opts: FakeNodeOptions = {}): FakeNode {
    return new FakeNode({ ...this.opts, ...opts, storage: this.storage, clock: this.clock });
  }

  /**
   * Moves the clock `ms` forward a step (a second unless told) at a time, waiting after each for
   * the background work it started, as the time passing would let it finish (an idle sweep reads
   * a sandbox's CPU before it freezes it).
   */
  async elapse(ms: number, stepMs = 1000): Promise<void> {
    for (let left = ms; left > 0; left -= stepMs) {
      this.clock.advance(Math.min(stepMs, left));
      await this.orchestrator.backgroundIdle();
    }
  }

  /** A create with E2B's defaults, from `base` unless `over` says otherwise. */
  create(over: Partial<CreateSandboxInput> = {}): Promise<SandboxRecord> {
    return this.orchestrator.create(createInput(over));
  }

  /** A node with one running sandbox whose runtime state holds `state`. */
  static async withRunning(
    opts: FakeNodeOptions = {},
    over: Partial<CreateSandboxInput> = {},
    state: Record<string, string> = {},
  ): Promise<{ node: FakeNode; orch: Orchestrator; rec: SandboxRecord; id: string }> {
    const node = new FakeNode(opts);
    const rec = await node.create(over);
    for (const [k, v] of Object.entries(state)) node.driver.write(rec.handle!.id, k, v);
    return { node, orch: node.orchestrator, rec, id: rec.sandboxId };
  }
}

/** A stored sandbox record with E2B's defaults, as tests write them into stores. */
export function sandboxRecord(
  over: Partial<SandboxRecord> & Pick<SandboxRecord, 'sandboxId' | 'state'>,
): SandboxRecord {
  const { source: _s, timeoutSecs: _t, volumeMounts: _v, ...settings } = createInput();
  return {
    version: 1,
    templateId: 'base',
    startedAt: '2026-01-01T00:00:00.000Z',
    endAt: '2026-01-01T00:05:00.000Z',
    ...DEFAULT_RESOURCES,
    ...settings,
    envdVersion: '0.6.4',
    ...over,
  };
}

export function createInput(over: Partial<CreateSandboxInput> = {}): CreateSandboxInput {
  return {
    source: { kind: 'named', name: 'base' },
    timeoutSecs: 300,
    metadata: {},
    envVars: {},
    autoPause: true,
    autoPauseMemory: true,
    autoResume: false,
    secure: false,
    egress: { allowInternet: true, allowOut: [], denyOut: [] },
    allowPublicTraffic: true,
    ...over,
  };
}

function fakeConfig(opts: FakeNodeOptions): NodeConfig {
  const c = defaultConfig({ HOSTNAME: 'fake-node' });
  return {
    ...c,
    ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
    homePath: '/fake/home',
    orchestrator: {
      ...c.orchestrator,
      ...(opts.maxSandboxes !== undefined ? { maxSandboxes: opts.maxSandboxes } : {}),
      ...(opts.maxConcurrentStarts !== undefined ? { maxConcurrentStarts: opts.maxConcurrentStarts } : {}),
      ...(opts.memoryLimitMb !== undefined ? { memoryLimitMb: opts.memoryLimitMb } : {}),
      ...(opts.idleFreezeSecs !== undefined ? { idleFreezeSecs: opts.idleFreezeSecs } : {}),
      ...(opts.idleFreezeCpuPct !== undefined ? { idleFreezeCpuPct: opts.idleFreezeCpuPct } : {}),
    },
    pool: { size: opts.poolSize ?? 0 },
    fork: { maxChildren: opts.forkMaxChildren ?? c.fork.maxChildren },
  };
}

import { DomainError } from '@agentenv/common';
import { DEFAULT_RESOURCES } from '../runtime/index.js';
import type { ActivityTracker } from './activity.js';
import type { AdmissionMeasure, AdmissionRequest, NodeLoad } from './admission.js';
import type { SandboxCore } from './core.js';
import type { SandboxRecord } from './record.js';
import type { HostMemory } from './seams.js';

const MIB = 2 ** 20;
/** How often host memory is read and pressure relieved (the usage sampler measures every 5 s). */
const PRESSURE_INTERVAL_MS = 5_000;
/** A sandbox with traffic more recent than this is never paused for memory. */
export const PRESSURE_MIN_IDLE_MS = 10_000;
/** Below this share of host memory available, idle sandboxes are paused. */
const LOW_WATER_FRACTION = 0.05;
/** Life given to a pressure-paused sandbox resumed with little or none of its own left. */
const WAKE_MIN_SECS = 300;

/** The node's memory as admission and pressure relief see it, in bytes. */
export interface MemoryFigures {
  /**
   * Sum of `memoryMB` of the sandboxes live on the node and starting; a frozen sandbox counts at
   * its measured working set instead (see MemoryPressure.counted).
   */
  nominal: number;
  /** Working sets of the live sandboxes at their last sample (an unsampled one counts at nominal). */
  measured: number;
  /** What sandboxes can still take: host MemAvailable, minus what started since it was read. */
  free: number;
  hostTotal: number;
  /** `[orchestrator] memory_limit_mb`; undefined when unset. */
  limit?: number;
}

export interface MemoryPolicy {
  /** Nominal memory may reach this many times host memory. */
  overcommit: number;
  /** Measured memory beyond which idle sandboxes are paused; undefined: host memory only. */
  limitBytes?: number;
}

/**
 * Why a start asking for `requestBytes` is refused, or undefined: nominal memory may reach
 * `overcommit` × host memory, and the request with the starts in flight must fit in what is free.
 */
export function memoryRefusal(
  requestBytes: number,
  startingBytes: number,
  f: MemoryFigures,
  overcommit: number,
): DomainError | undefined {
  const ceiling = overcommit * f.hostTotal;
  if (f.nominal + requestBytes > ceiling)
    return new DomainError(
      'capacity',
      `this node has ${mib(f.nominal)} MiB of sandbox memory allocated; ${mib(requestBytes)} MiB more ` +
        `exceeds ${overcommit} × its ${mib(f.hostTotal)} MiB`,
      5,
    );
  if (startingBytes + requestBytes > f.free)
    return new DomainError(
      'capacity',
      `this node has ${mib(Math.max(0, f.free - startingBytes))} MiB of memory free; the sandbox needs ${mib(requestBytes)} MiB`,
      5,
    );
  return undefined;
}

/**
 * Bytes to take back from sandboxes: what measured memory is over the limit, or what free
 * memory is below the low-water mark (5 % of host memory), whichever is more; 0 without pressure.
 */
export function pressureExcess(f: MemoryFigures): number {
  const overLimit = f.limit === undefined ? 0 : f.measured - f.limit;
  const underLowWater = LOW_WATER_FRACTION * f.hostTotal - f.free;
  return Math.max(0, overLimit, underLowWater);
}

export interface PauseCandidate {
  readonly sandboxId: string;
  /** Milliseconds without traffic (0 while a request is open). */
  readonly idleMs: number;
  /** Its measured memory, what pausing it gives back. */
  readonly bytes: number;
}

/**
 * The sandboxes to pause to give back `excess` bytes: idle ones (no traffic for
 * PRESSURE_MIN_IDLE_MS), least recently used first, as few as cover it.
 */
export function choosePressurePauses(candidates: readonly PauseCandidate[], excess: number): string[] {
  const out: string[] = [];
  let freed = 0;
  const idle = candidates.filter((c) => c.idleMs >= PRESSURE_MIN_IDLE_MS);
  for (const c of idle.sort((a, b) => b.idleMs - a.idleMs)) {
    if (freed >= excess) break;
    out.push(c.sandboxId);
    freed += c.bytes;
  }
  return out;
}

/**
 * Refuses a pause for memory of a sandbox used since it was chosen: the pauses run one after
 * another, and a request that began meanwhile (a command streaming its output) would be cut by
 * the pause's drain. Called under the sandbox's lock, right before the drain.
 */
export function refuseIfInUse(activity: ActivityTracker, id: string): void {
  if ((activity.idleFor(id) ?? 0) < PRESSURE_MIN_IDLE_MS)
    throw new DomainError('conflict', `sandbox ${id} is in use; it is not paused for memory`);
}

/** What the node does to sandboxes for memory (the orchestrator's pause and resume). */
export interface MemoryActions {
  pause(id: string): Promise<void>;
  resume(id: string, secs: number): Promise<unknown>;
}

/** Host MemAvailable when last read, and what each live sandbox counted then. */
interface HostReading {
  available: number;
  counted: Map<string, number>;
}

const PAUSE_TASK = 'memory-pressure-pause';

/**
 * Measured memory for admission and the relief of host memory pressure. gVisor has no balloon:
 * memory the guest frees goes back to the host, but an idle guest keeps what it holds, so under
 * pressure the least recently used idle sandboxes are paused to the repository, and resumed on
 * their next request whatever their autoResume (the record says they were paused for memory).
 * Working sets come from the node's usage sampler (`record`), not a stat per admission.
 */
export class MemoryPressure {
  private readonly workingSets = new Map<string, number>();
  private reading: HostReading | undefined;

  constructor(
    private readonly core: SandboxCore,
    private readonly host: HostMemory,
    private readonly hostTotal: number,
    private readonly policy: MemoryPolicy,
    private readonly act: MemoryActions,
    private readonly isFrozen: (sandboxId: string) => boolean,
  ) {}

  /** A sandbox's working set, as the usage sampler measured it. */
  record(sandboxId: string, bytes: number): void {
    this.workingSets.set(sandboxId, bytes);
  }

  /** The admission measure: see memoryRefusal. Before host memory was read once, only nominal counts. */
  measure(): AdmissionMeasure {
    return {
      name: 'memory',
      refuse: (req: AdmissionRequest, load: NodeLoad) =>
        memoryRefusal(
          // A create's template is resolved after admission: it counts at the default size.
          (req.resources?.memoryMB ?? DEFAULT_RESOURCES.memoryMB) * MIB,
          load.startingMemoryMB * MIB,
          this.figures(load.startingMemoryMB * MIB),
          this.policy.overcommit,
        ),
    };
  }

  figures(startingBytes = 0): MemoryFigures {
    const counted = this.counted();
    let nominal = startingBytes;
    let measured = 0;
    for (const c of counted.values()) {
      nominal += c.nominal;
      measured += c.bytes;
    }
    return {
      nominal,
      measured,
      free: this.free(counted),
      hostTotal: this.hostTotal,
      ...(this.policy.limitBytes !== undefined ? { limit: this.policy.limitBytes } : {}),
    };
  }

  start(intervalMs = PRESSURE_INTERVAL_MS): void {
    this.core.background.every('memory-pressure', intervalMs, () => this.relieve());
    void this.core.background.run('memory-pressure', undefined, () => this.relieve());
  }

  /** Reads host memory, then pauses idle sandboxes while there is pressure. */
  async relieve(): Promise<void> {
    const available = await this.host.availableBytes();
    const counted = this.counted();
    for (const id of this.workingSets.keys()) if (!counted.has(id)) this.workingSets.delete(id);
    this.reading = { available, counted: new Map([...counted].map(([id, c]) => [id, c.bytes])) };
    const excess = pressureExcess(this.figures());
    if (excess === 0) return;
    const { activity, background, d } = this.core;
    const busy = new Set(
      background
        .pending()
        .filter((t) => t.name === PAUSE_TASK)
        .map((t) => t.sandboxId),
    );
    const candidates = [...counted]
      .filter(([id]) => !busy.has(id) && d.store.get(id)?.state === 'running')
      .map(([id, c]) => ({ sandboxId: id, idleMs: activity.idleFor(id) ?? 0, bytes: c.bytes }));
    const chosen = choosePressurePauses(candidates, excess);
    if (chosen.length === 0) return;
    d.logger.info({ excessMiB: mib(excess), sandboxes: chosen }, 'memory pressure: pausing idle sandboxes');
    // One after another, least recently used first: each pause gives its memory back before the next.
    await background.run(PAUSE_TASK, undefined, async () => {
      for (const id of chosen)
        await this.act
          .pause(id)
          .catch((err: unknown) => d.logger.warn({ err, sandboxId: id }, 'memory pressure: pause failed'));
    });
  }

  /**
   * Resumes a sandbox paused for memory (a request reached it); false for any other sandbox.
   * It keeps the end time it had, or gets WAKE_MIN_SECS when that has (nearly) passed.
   */
  async wake(rec: SandboxRecord): Promise<boolean> {
    if (rec.state !== 'paused' || !rec.pausedForMemory) return false;
    const left = Math.ceil((Date.parse(rec.endAt) - this.core.clock.now()) / 1000);
    await this.act.resume(rec.sandboxId, Math.max(left, WAKE_MIN_SECS));
    return true;
  }

  /**
   * Each live sandbox's nominal and measured bytes. A frozen sandbox that was measured counts at
   * its working set in both: it runs no code, so it cannot grow until a request thaws it, and
   * one that then grows is what the pressure pauses are there for. Idle sandboxes, nearly all
   * frozen, so take what they hold (tens of MiB) from the overcommit ceiling, not their size.
   */
  private counted(): Map<string, { nominal: number; bytes: number }> {
    const out = new Map<string, { nominal: number; bytes: number }>();
    // A suspended sandbox holds its memory until its pause's checkpoint ended and it was stopped.
    // Sizes come from the handles, not the records: every admission counts every sandbox.
    const live = [...this.core.live, ...[...this.core.suspended].map(([id, s]) => [id, s.live] as const)];
    for (const [id, { handle }] of live) {
      const size = handle.resources.memoryMB * MIB;
      const measured = this.workingSets.get(id);
      const nominal = measured !== undefined && this.isFrozen(id) ? Math.min(size, measured) : size;
      out.set(id, { nominal, bytes: measured ?? size });
    }
    return out;
  }

  /**
   * MemAvailable at the last reading, less what sandboxes live since then count, plus what those
   * gone since then counted (their memory is back, or soon is).
   */
  private free(counted: Map<string, { nominal: number; bytes: number }>): number {
    if (!this.reading) return Number.POSITIVE_INFINITY;
    let free = this.reading.available;
    for (const [id, c] of counted) if (!this.reading.counted.has(id)) free -= c.bytes;
    for (const [id, bytes] of this.reading.counted) if (!counted.has(id)) free += bytes;
    return free;
  }
}

const mib = (bytes: number) => Math.round(bytes / MIB);

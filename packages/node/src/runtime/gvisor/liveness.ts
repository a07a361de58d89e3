import { readdir } from 'node:fs/promises';
import { containerOfRunscFile, type DriverLayout } from './layout.js';
import { isRunning } from './processes.js';
import type { CommandResult } from './runsc.js';

/** What the liveness monitor looks at, per sandbox. */
export interface Watched {
  readonly id: string;
  readonly pid: number;
  /** Being released, or in a checkpoint (a sandbox that stops during one is handled there). */
  readonly quiet: boolean;
  /** Stopped by the cgroup freezer: it runs no code, so it can only die by an outside kill. */
  readonly frozen: boolean;
}

/** A frozen sandbox is looked at once every this many rounds. */
export const FROZEN_EVERY = 30;

/**
 * Polls the sandbox processes and reports those that died on their own (runsc or envd crashed).
 * Frozen and paused sandboxes still count as running. A frozen sandbox cannot crash (only the OOM
 * killer or a kill from outside ends it), so it is looked at only every FROZEN_EVERY rounds: a
 * node of idle sandboxes then reads next to nothing each second.
 */
export class LivenessMonitor {
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  private round = 0;

  constructor(
    private readonly watched: () => Iterable<Watched>,
    private readonly onDead: (id: string) => Promise<void>,
    private readonly alive: (pid: number) => Promise<boolean> = isRunning,
  ) {}

  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One round (the timer's; a round still under way makes this one a no-op). */
  async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    const frozenToo = this.round++ % FROZEN_EVERY === 0;
    try {
      for (const w of [...this.watched()]) {
        if (w.quiet || (w.frozen && !frozenToo)) continue;
        if (!(await this.alive(w.pid))) await this.onDead(w.id).catch(() => undefined);
      }
    } finally {
      this.checking = false;
    }
  }
}

/**
 * Ids of sandboxes under this driver's runtime dir that `known` does not hold: containers in
 * runsc's root and bundle directories a previous process of the node left (crashed, or killed
 * during a background release).
 */
export async function findOrphans(
  layout: DriverLayout,
  list: () => Promise<CommandResult>,
  known: (id: string) => boolean,
): Promise<string[]> {
  const r = await list();
  let ids: string[] = [];
  try {
    ids = ((JSON.parse(r.stdout || '[]') ?? []) as { id: string }[]).map((c) => c.id);
  } catch {
    ids = [];
  }
  const bundles = await readdir(layout.sandboxesDir).catch(() => [] as string[]);
  const leftFiles = (await readdir(layout.runscRoot).catch(() => [] as string[]))
    .map(containerOfRunscFile)
    .filter((id): id is string => id !== undefined);
  return [...new Set([...ids, ...bundles, ...leftFiles])].filter((id) => !known(id));
}

/** What sweeping a driver's orphans takes (the driver's runsc, cgroups and reclaimer). */
export interface OrphanSweep {
  /** Thaws this driver's frozen sandboxes: a predecessor's warm pool and idle-frozen ones. */
  thawAll(): Promise<void>;
  /** `runsc list --format=json` on the driver's root. */
  list(): Promise<CommandResult>;
  known(id: string): boolean;
  release(id: string): Promise<void>;
  /** Takes the checkpoint owed to a sandbox whose pause answered before its node died (suspend). */
  finishSuspended(id: string): Promise<void>;
}

/**
 * Releases every orphan of the driver's runtime dir. They are thawed before runsc is asked about
 * any of them: runsc asks a container it loads whether it still runs, and a frozen sentry never
 * answers, so each such command waited for its timeout (a minute) and so did the node's start.
 */
export async function sweepOrphans(layout: DriverLayout, s: OrphanSweep): Promise<void> {
  await s.thawAll();
  for (const id of await findOrphans(
    layout,
    () => s.list(),
    (id) => s.known(id),
  )) {
    await s.finishSuspended(id);
    await s.release(id);
  }
}

/**
 * The bare-runsc side of bench/lifecycle.ts: the runtime work of each lifecycle operation done
 * with runsc alone (same flags, bundle and readiness check as the driver) on the node's own
 * template capture, in the same run.
 */
import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { GvisorHost } from '@agentenv/node';
import { readCapture } from '@agentenv/snapshot';
import { createTestNet, type TestNet } from '@agentenv/test-support/runtime';
import { bareRunsc, type BareRunsc, type BareSource } from './bare-runsc.js';
import { timeMs } from './stats.js';

/** Writes fresh random data at 30 MiB/s into a 64 MiB ring file inside the sandbox. */
export const WRITER = `
import os, time
RING, BLK, RATE = 64 << 20, 1 << 20, 30 << 20
f = open('/tmp/aenv-bench-ring', 'wb+')
n, t0 = 0, time.time()
while True:
    f.seek(n * BLK % RING); f.write(os.urandom(BLK)); f.flush(); n += 1
    lag = t0 + n * BLK / RATE - time.time()
    if lag > 0: time.sleep(lag)
    elif lag < -1: t0 -= lag + 1
`;

/**
 * Wakes every millisecond and remembers the longest stall between two wakeups; when
 * /tmp/aenv-gap-reset appears it writes that stall (seconds) to /tmp/aenv-gap and starts over.
 * A checkpoint stops the whole sandbox, so the stall it sees is how long the sandbox was held.
 */
export const GAP_PROBE = `
import os, time
mx, last = 0.0, time.monotonic()
while True:
    time.sleep(0.001)
    now = time.monotonic()
    mx, last = max(mx, now - last), now
    if os.path.exists('/tmp/aenv-gap-reset'):
        os.remove('/tmp/aenv-gap-reset')
        with open('/tmp/aenv-gap.tmp', 'w') as f: f.write(str(mx))
        os.replace('/tmp/aenv-gap.tmp', '/tmp/aenv-gap')
        mx = 0.0
`;

export interface BareResults {
  restore: number[];
  checkpointStop: number[];
  restorePaused: number[];
  delete: number[];
  deleteUnreaped: number[];
  forks: Map<number, number[]>;
}

/** `checkpoint --leave-running` of one sandbox, by whether the image was kept (as a snapshot is). */
export interface SnapshotFloor {
  kept: number[];
  deleted: number[];
}

/** Writes every dirty page out, so that what one measurement wrote does not slow the next. */
export async function flushDisk(): Promise<void> {
  await promisify(execFile)('sync', { timeout: 120_000 });
}

export class BareLab {
  private readonly bare: BareRunsc;
  private readonly unreaped: BareRunsc;
  private readonly nets: TestNet[] = [];
  /** Bare sandboxes' addresses: the upper half of the bench's /16 (the node has the lower). */
  private readonly within: { prefix: string; firstThird: number };

  constructor(
    host: GvisorHost,
    private readonly dir: string,
    cgroupParent: string,
    netPrefix: string,
  ) {
    this.within = { prefix: netPrefix, firstThird: 128 };
    this.bare = bareRunsc(host, { dir, cgroupParent, underReaper: true });
    this.unreaped = bareRunsc(host, { dir: `${dir}-pid1`, cgroupParent: `${cgroupParent}-pid1` });
  }

  async cleanup(): Promise<void> {
    await this.bare.cleanup();
    await this.unreaped.cleanup();
    for (const n of this.nets.splice(0)) n.destroy();
    await rm(this.dir, { recursive: true, force: true });
    await rm(`${this.dir}-pid1`, { recursive: true, force: true });
  }

  private net(): TestNet {
    const n = createTestNet(this.within);
    this.nets.push(n);
    return n;
  }

  private drop(n: TestNet): void {
    n.destroy();
    this.nets.splice(this.nets.indexOf(n), 1);
  }

  /** A bare sandbox restored from `capture` until envd answers; returns its id and the time. */
  private async restore(b: BareRunsc, capture: string, source: BareSource, resources: Resources) {
    const net = this.net();
    const bundle = await b.bundle(net, source, resources);
    const ms = await timeMs(async () => {
      await b.launch(['restore', '--image-path', capture, '--bundle', bundle.dir, '--detach', bundle.id]);
      await b.healthy(net);
    });
    return { id: bundle.id, net, ms };
  }

  private async checkpoint(
    id: string,
    leaveRunning: boolean,
    flags: readonly string[] = [],
  ): Promise<{ dir: string; ms: number }> {
    const dir = join(this.dir, 'captures', `${id}-${Date.now()}`);
    await mkdir(dir, { recursive: true });
    const args = [
      'checkpoint',
      '--image-path',
      dir,
      '--compression=none',
      ...(leaveRunning ? ['--leave-running'] : []),
      ...flags,
    ];
    return { dir, ms: await timeMs(() => this.bare.run([...args, id])) };
  }

  /**
   * `runsc checkpoint` (stopping the sandbox) of a freshly restored sandbox, `iter` times, with
   * `flags` added (options that might make the checkpoint itself cheaper).
   */
  async measureCheckpointStop(
    template: string,
    iter: number,
    flags: readonly string[] = [],
  ): Promise<number[]> {
    const { source, res } = await bareSourceOf(template);
    const out: number[] = [];
    for (let i = 0; i < iter; i++) {
      const a = await this.restore(this.bare, template, source, res);
      const stop = await this.checkpoint(a.id, false, flags);
      out.push(stop.ms);
      await this.bare.kill(a.id);
      this.drop(a.net);
      await rm(stop.dir, { recursive: true, force: true });
    }
    return out;
  }

  async measure(template: string, iter: number, forkReps: number): Promise<BareResults> {
    const { source, res } = await bareSourceOf(template);
    const r: BareResults = {
      restore: [],
      checkpointStop: [],
      restorePaused: [],
      delete: [],
      deleteUnreaped: [],
      forks: new Map(),
    };
    for (let i = 0; i < iter; i++) {
      const a = await this.restore(this.bare, template, source, res);
      r.restore.push(a.ms);
      const stop = await this.checkpoint(a.id, false);
      r.checkpointStop.push(stop.ms);
      await this.bare.kill(a.id);
      this.drop(a.net);
      const back = await this.restore(this.bare, stop.dir, source, res);
      r.restorePaused.push(back.ms);
      r.delete.push(await timeMs(() => this.bare.kill(back.id)));
      this.drop(back.net);
      await rm(stop.dir, { recursive: true, force: true });
    }
    for (let i = 0; i < 3; i++) {
      const u = await this.restore(this.unreaped, template, source, res);
      r.deleteUnreaped.push(await timeMs(() => this.unreaped.kill(u.id)));
      this.drop(u.net);
    }
    const s = await this.restore(this.bare, template, source, res);
    // Taken before anything runs in it, like the node's fork parent.
    const forkCapture = await this.checkpoint(s.id, true);
    await this.bare.kill(s.id);
    this.drop(s.net);
    r.forks = await this.forkSizes(forkCapture.dir, forkReps, source, res);
    await rm(forkCapture.dir, { recursive: true, force: true });
    return r;
  }

  /**
   * The snapshots' floor: `checkpoint --leave-running` of a sandbox running the node's stall probe,
   * then also its writer (or the node would checkpoint more memory and a busier sandbox than its
   * floor), `iter` times back to back with each image deleted at once, then `iter` times at the
   * node's pace (one every `everyMs`) with the images kept until the end, as a snapshot's is: a
   * kept image is written back to the disk while later ones are taken, a deleted one never is.
   */
  async measureSnapshots(
    template: string,
    iter: number,
    everyMs: { quiet: number; writing: number },
  ): Promise<{ quiet: SnapshotFloor; writing: SnapshotFloor }> {
    const { source, res } = await bareSourceOf(template);
    const s = await this.restore(this.bare, template, source, res);
    const floor = async (every: number): Promise<SnapshotFloor> => {
      const deleted: number[] = [];
      for (let i = 0; i < iter; i++) {
        const c = await this.checkpoint(s.id, true);
        deleted.push(c.ms);
        await rm(c.dir, { recursive: true, force: true });
      }
      await flushDisk();
      const kept: number[] = [];
      const dirs: string[] = [];
      for (let i = 0; i < iter; i++) {
        const c = await this.checkpoint(s.id, true);
        kept.push(c.ms);
        dirs.push(c.dir);
        await sleep(Math.max(0, every - c.ms));
      }
      for (const dir of dirs) await rm(dir, { recursive: true, force: true });
      return { kept, deleted };
    };
    try {
      await this.startInside(s.id, GAP_PROBE);
      const quiet = await floor(everyMs.quiet);
      await this.startInside(s.id, WRITER);
      await sleep(2000);
      return { quiet, writing: await floor(everyMs.writing) };
    } finally {
      await this.bare.kill(s.id);
      this.drop(s.net);
    }
  }

  /** Starts a Python program in the background inside a bare sandbox. */
  private async startInside(id: string, program: string): Promise<void> {
    // (not `exec --detach`: runsc appends its --pid-file flag after the command's arguments)
    await this.bare.run(['exec', id, '/bin/sh', '-c', 'nohup python3 -c "$0" >/dev/null 2>&1 &', program]);
  }

  /** Only the forks' baseline: parallel restores of a running sandbox's capture, by fork size. */
  async measureForks(template: string, forkReps: number): Promise<Map<number, number[]>> {
    const { source, res } = await bareSourceOf(template);
    const s = await this.restore(this.bare, template, source, res);
    const forkCapture = await this.checkpoint(s.id, true);
    await this.bare.kill(s.id);
    this.drop(s.net);
    const forks = await this.forkSizes(forkCapture.dir, forkReps, source, res);
    await rm(forkCapture.dir, { recursive: true, force: true });
    return forks;
  }

  private async forkSizes(capture: string, reps: number, source: BareSource, res: Resources) {
    const forks = new Map<number, number[]>();
    for (const k of FORK_SIZES) forks.set(k, await this.parallelRestores(k, reps, capture, source, res));
    return forks;
  }

  /** k restores of one capture in parallel until all answer; networks and bundles made beforehand. */
  private async parallelRestores(
    k: number,
    reps: number,
    capture: string,
    source: BareSource,
    res: Resources,
  ): Promise<number[]> {
    const out: number[] = [];
    for (let rep = 0; rep < reps; rep++) {
      const nets = Array.from({ length: k }, () => this.net());
      const bundles = await Promise.all(nets.map((n) => this.bare.bundle(n, source, res)));
      out.push(
        await timeMs(() =>
          Promise.all(
            bundles.map(async (b, i) => {
              await this.bare.launch([
                'restore',
                '--image-path',
                capture,
                '--bundle',
                b.dir,
                '--detach',
                b.id,
              ]);
              await this.bare.healthy(nets[i]!);
            }),
          ),
        ),
      );
      await Promise.all(bundles.map((b) => this.bare.kill(b.id)));
      for (const n of nets) this.drop(n);
    }
    return out;
  }
}

type Resources = Parameters<BareRunsc['bundle']>[2];

/** How many children the forks are measured with. */
export const FORK_SIZES = [1, 4, 16] as const;

async function bareSourceOf(template: string): Promise<{ source: BareSource; res: Resources }> {
  const { meta } = await readCapture(template);
  const source: BareSource = {
    rootfs: meta.layers[0]!,
    init: meta.init,
    mounts: meta.mounts,
    hostname: meta.hostname,
  };
  return { source, res: meta.resources };
}

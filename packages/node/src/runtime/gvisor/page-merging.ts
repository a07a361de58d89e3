import { access, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DriverUnavailableError } from '../errors.js';
import type { GvisorHost } from './host.js';

const KSM_DIR = '/sys/kernel/mm/ksm';

/**
 * Full scans of ksmd after the last new sandbox before it may stop: a page is put in the tree of
 * merge candidates only once a scan found it unchanged since the one before, and merged when a
 * later visit finds its twin there (three were enough for 40 restored sandboxes here).
 */
export const SCANS_TO_SETTLE = 3;

/** How often ksmd's progress is read while it runs for us. */
const POLL_MS = 2000;

/**
 * The kernel's KSM control files (`run`, `full_scans`, …), as text, and a mark the node keeps
 * while ksmd runs because of it: a node that crashed meanwhile finds it at its next start.
 */
export interface KsmFiles {
  read(name: string): Promise<string>;
  write(name: string, value: string): Promise<void>;
  marked(): Promise<boolean>;
  mark(on: boolean): Promise<void>;
}

export function sysfsKsm(markPath: string): KsmFiles {
  return {
    read: (name) => readFile(join(KSM_DIR, name), 'utf8'),
    write: (name, value) => writeFile(join(KSM_DIR, name), value),
    marked: () =>
      access(markPath).then(
        () => true,
        () => false,
      ),
    mark: (on) => (on ? writeFile(markPath, '') : rm(markPath, { force: true })),
  };
}

/**
 * Runs the kernel's same-page merging daemon (ksmd) only while there is something new to merge.
 * The sandboxes' runtime processes are marked mergeable when they start (aenv-reaper
 * --merge-pages); ksmd scanning at its default rate costs ~7 % of a core here even once all is
 * merged, and a frozen sandbox's pages do not change, so after each new sandbox ksmd runs for
 * SCANS_TO_SETTLE full scans and is stopped (`run` 0 keeps what it merged).
 *
 * The node owns ksmd only when it found it stopped (or left running by a previous process of the
 * node, which it then stops): a host that runs it already (`run` 1) keeps running it its own way,
 * and merges the sandboxes' pages as well.
 */
export class PageMerging {
  private settleAt: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly files: KsmFiles,
    private readonly owned: boolean,
  ) {}

  /** Null when the kernel has no KSM. */
  static async open(files: KsmFiles): Promise<PageMerging | null> {
    const run = await files.read('run').catch(() => null);
    if (run === null) return null;
    if (run.trim() === '0') return new PageMerging(files, true);
    if (!(await files.marked())) return new PageMerging(files, false);
    await files.write('run', '0');
    await files.mark(false);
    return new PageMerging(files, true);
  }

  /** Whether ksmd runs now because of this node. */
  get running(): boolean {
    return this.settleAt !== null;
  }

  /** A sandbox started with mergeable memory: ksmd runs until it is merged. */
  changed(): Promise<void> {
    if (!this.owned || this.closed) return Promise.resolve();
    this.polling = this.polling.then(() => this.startOrExtend()).catch(() => undefined);
    return this.polling;
  }

  /** Stops ksmd if this node started it (its merged pages stay merged). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.polling;
    if (this.settleAt !== null) await this.stop().catch(() => undefined);
    this.settleAt = null;
  }

  private async stop(): Promise<void> {
    await this.files.write('run', '0');
    await this.files.mark(false);
  }

  private async scans(): Promise<number> {
    return Number((await this.files.read('full_scans')).trim());
  }

  private async startOrExtend(): Promise<void> {
    if (this.closed) return;
    const target = (await this.scans()) + SCANS_TO_SETTLE;
    if (this.settleAt === null) {
      await this.files.mark(true);
      await this.files.write('run', '1');
    }
    this.settleAt = Math.max(this.settleAt ?? 0, target);
    this.timer ??= setInterval(() => {
      this.polling = this.polling.then(() => this.settleOnce()).catch(() => undefined);
    }, POLL_MS);
    this.timer.unref();
  }

  /**
   * One look at ksmd's progress: stops it once the scans owed are done, starts it again when
   * another node on the host stopped it before they were.
   */
  async settleOnce(): Promise<void> {
    if (this.settleAt === null) return;
    if ((await this.scans()) < this.settleAt) {
      if ((await this.files.read('run')).trim() === '0') await this.files.write('run', '1');
      return;
    }
    await this.stop();
    this.settleAt = null;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/** The node's page merging, for a driver asked to merge pages; refused where it cannot. */
export async function openPageMerging(host: GvisorHost, runtimeDir: string): Promise<PageMerging> {
  const merging = await PageMerging.open(sysfsKsm(join(runtimeDir, 'ksmd-started')));
  if (!merging) throw new DriverUnavailableError(`runtime.merge_pages: this kernel has no KSM (${KSM_DIR})`);
  if (!host.reaperPath)
    throw new DriverUnavailableError(
      'runtime.merge_pages needs aenv-reaper (npm run build:native -w @agentenv/node)',
    );
  return merging;
}

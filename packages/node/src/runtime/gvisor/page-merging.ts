import { readFile, writeFile } from 'node:fs/promises';
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

/** The kernel's KSM control files (`run`, `full_scans`, …), as text. */
export interface KsmFiles {
  read(name: string): Promise<string>;
  write(name: string, value: string): Promise<void>;
}

export const sysfsKsm: KsmFiles = {
  read: (name) => readFile(join(KSM_DIR, name), 'utf8'),
  write: (name, value) => writeFile(join(KSM_DIR, name), value),
};

/**
 * Runs the kernel's same-page merging daemon (ksmd) only while there is something new to merge.
 * The sandboxes' runtime processes are marked mergeable when they start (aenv-reaper
 * --merge-pages); ksmd scanning at its default rate costs ~7 % of a core here even once all is
 * merged, and a frozen sandbox's pages do not change, so after each new sandbox ksmd runs for
 * SCANS_TO_SETTLE full scans and is stopped (`run` 0 keeps what it merged).
 *
 * The node owns ksmd only when it found it stopped: a host that runs it already (`run` 1) keeps
 * running it its own way, and merges the sandboxes' pages as well.
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
  static async open(files: KsmFiles = sysfsKsm): Promise<PageMerging | null> {
    const run = await files.read('run').catch(() => null);
    if (run === null) return null;
    return new PageMerging(files, run.trim() === '0');
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
    if (this.settleAt !== null) await this.files.write('run', '0').catch(() => undefined);
    this.settleAt = null;
  }

  private async scans(): Promise<number> {
    return Number((await this.files.read('full_scans')).trim());
  }

  private async startOrExtend(): Promise<void> {
    if (this.closed) return;
    const target = (await this.scans()) + SCANS_TO_SETTLE;
    if (this.settleAt === null) await this.files.write('run', '1');
    this.settleAt = Math.max(this.settleAt ?? 0, target);
    this.timer ??= setInterval(() => {
      this.polling = this.polling.then(() => this.settleOnce()).catch(() => undefined);
    }, POLL_MS);
    this.timer.unref();
  }

  /** One look at ksmd's progress: stops it once the scans owed are done. */
  async settleOnce(): Promise<void> {
    if (this.settleAt === null || (await this.scans()) < this.settleAt) return;
    await this.files.write('run', '0');
    this.settleAt = null;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/** The node's page merging, for a driver asked to merge pages; refused where it cannot. */
export async function openPageMerging(host: GvisorHost): Promise<PageMerging> {
  const merging = await PageMerging.open();
  if (!merging) throw new DriverUnavailableError(`runtime.merge_pages: this kernel has no KSM (${KSM_DIR})`);
  if (!host.reaperPath)
    throw new DriverUnavailableError(
      'runtime.merge_pages needs aenv-reaper (npm run build:native -w @agentenv/node)',
    );
  return merging;
}

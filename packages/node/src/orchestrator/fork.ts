import { DomainError, invalid, withContext } from '@agentenv/common';
import { captureRunning } from './capture.js';
import type { SandboxCore } from './core.js';
import type { CreateSandboxInput, Creator } from './create.js';
import { forkChildSettings } from './fork-settings.js';
import type { SandboxRecord } from './record.js';
import type { SandboxSource } from './seams.js';
import type { Capture } from '../runtime/index.js';
import type { NetSlot } from '../network/index.js';

/** One child of a fork: the sandbox, or why it did not start. */
export type ForkResult = { sandbox: SandboxRecord } | { error: DomainError };

/** Forks: children restored from one capture of a running sandbox, which runs on. */
export class Forker {
  constructor(
    private readonly core: SandboxCore,
    private readonly creator: Creator,
  ) {}

  /**
   * Forks a running sandbox into `count` independent children started in parallel from one
   * capture. The parent is paused only for the capture. One result per child: a failed child
   * affects neither the others nor the parent.
   */
  async fork(id: string, count: number, timeoutSecs: number | undefined): Promise<ForkResult[]> {
    const max = this.core.d.config.fork.maxChildren;
    if (!Number.isInteger(count) || count < 1 || count > max)
      throw invalid(`count must be between 1 and ${max}`);
    const slots = this.slotsAhead(id, count);
    try {
      const { source: parent, capture } = await captureRunning(this.core, id, 'fork');
      try {
        return await this.startChildren(id, parent, capture, count, timeoutSecs, slots);
      } finally {
        await this.core.d.captures.remove(capture.dir);
      }
    } finally {
      await slots.giveBack();
    }
  }

  private async startChildren(
    id: string,
    parent: SandboxRecord,
    capture: Capture,
    count: number,
    timeoutSecs: number | undefined,
    slots: SlotsAhead,
  ): Promise<ForkResult[]> {
    const source: SandboxSource = { kind: 'fork', capture, parent };
    const template = await this.core.d.sources.resolve(source);
    const input: CreateSandboxInput = {
      source,
      ...forkChildSettings(parent, timeoutSecs, this.core.clock.now()),
    };
    const results = await Promise.allSettled(
      Array.from({ length: count }, (_, i) => this.creator.child(template, input, id, () => slots.take(i))),
    );
    const started = results.filter((r) => r.status === 'fulfilled').length;
    this.core.logs.add(id, `forked into ${started} of ${count} children`);
    this.core.emit('forked', id, 'request', { child_count: String(started) });
    return results.map((r) => {
      if (r.status === 'fulfilled') return { sandbox: r.value };
      const e =
        r.reason instanceof DomainError ? r.reason : withContext(r.reason, 'the child failed to start');
      return { error: e };
    });
  }

  /**
   * The children's network slots, built while the parent is checkpointed instead of after it,
   * each with the parent's egress rules (a running parent's; none for another, which fails next).
   */
  private slotsAhead(id: string, count: number): SlotsAhead {
    const rec = this.core.d.store.get(id);
    const building =
      rec?.state === 'running'
        ? Array.from({ length: count }, () => this.core.d.slots.acquire(rec.egress))
        : [];
    return new SlotsAhead(building, (slot) => this.core.releaseSlot(slot, id));
  }
}

/** Slots built ahead for a fork's children; what no child took is released at the end. */
class SlotsAhead {
  private readonly taken = new Set<number>();

  constructor(
    private readonly building: Promise<NetSlot>[],
    private readonly release: (slot: NetSlot) => Promise<void>,
  ) {
    // A slot that fails while the parent is checkpointed is not a crash: its child builds one.
    for (const p of building) p.catch(() => undefined);
  }

  /** Child `i`'s slot; rejects when none was built for it (the child then builds its own). */
  take(i: number): Promise<NetSlot> {
    const slot = this.building[i];
    if (!slot) return Promise.reject(new Error('no slot built ahead'));
    this.taken.add(i);
    return slot;
  }

  async giveBack(): Promise<void> {
    await Promise.all(
      this.building.map(async (p, i) => {
        if (this.taken.has(i)) return;
        const slot = await p.catch(() => undefined);
        if (slot) await this.release(slot);
      }),
    );
  }
}

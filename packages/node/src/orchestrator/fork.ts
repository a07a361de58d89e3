import { DomainError, invalid, withContext } from '@agentenv/common';
import { captureRunning } from './capture.js';
import type { SandboxCore } from './core.js';
import type { CreateSandboxInput, Creator } from './create.js';
import { forkChildSettings } from './fork-settings.js';
import type { SandboxRecord } from './record.js';
import type { SandboxSource } from './seams.js';

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
    const { source: parent, capture } = await captureRunning(this.core, id, 'fork');
    try {
      const source: SandboxSource = { kind: 'fork', capture, parent };
      const template = await this.core.d.sources.resolve(source);
      const input: CreateSandboxInput = {
        source,
        ...forkChildSettings(parent, timeoutSecs, this.core.clock.now()),
      };
      const results = await Promise.allSettled(
        Array.from({ length: count }, () => this.creator.child(template, input, id)),
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
    } finally {
      await this.core.d.captures.remove(capture.dir);
    }
  }
}

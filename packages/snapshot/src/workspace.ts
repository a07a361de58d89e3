import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The workspace: node-local scratch space where a capture is written by the runtime before it is
 * stored (and then adopted by the runtime cache or thrown away). Nothing in it is worth keeping
 * across a restart or a failure, so it is emptied when the node starts and each capture's
 * directory is removed when its operation ends, however it ends. It should be on the same
 * filesystem as the runtime cache, so that adopting a capture is a rename.
 */
export class Workspace {
  constructor(readonly dir: string) {}

  /** Empties the workspace (what is there belongs to a previous process). */
  async open(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  /** A fresh path (not created: a driver's checkpoint wants to create it) for `fn`, removed afterwards. */
  async use<T>(fn: (dir: string) => Promise<T>): Promise<T> {
    const dir = join(this.dir, `c-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`);
    try {
      return await fn(dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

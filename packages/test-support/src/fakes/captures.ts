import type { CaptureDirs, CaptureKind } from '@agentenv/node/server';
import type { FakeDisk } from './disk.js';

/** Capture directories on a FakeDisk, under `/captures/<sandboxId>/`. */
export class FakeCaptureDirs implements CaptureDirs {
  private seq = 0;

  constructor(
    private readonly disk: FakeDisk,
    readonly root = '/captures',
  ) {}

  allocate(sandboxId: string, kind: CaptureKind): string {
    return `${this.root}/${sandboxId}/${kind}-${++this.seq}`;
  }

  complete(dir: string): boolean {
    return this.disk.read(dir)?.complete === true;
  }

  async remove(dir: string): Promise<void> {
    this.disk.delete(dir);
  }

  async removeAll(sandboxId: string): Promise<void> {
    this.disk.deleteUnder(`${this.root}/${sandboxId}`);
  }

  /** What is on disk for a sandbox. */
  of(sandboxId: string): string[] {
    return this.disk.list(`${this.root}/${sandboxId}`);
  }
}

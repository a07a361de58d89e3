import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { newSandboxId } from '@agentenv/common';
import { CAPTURE_META_FILE } from '@agentenv/snapshot';
import type { CaptureDirs, CaptureKind } from '../seams.js';

/** Captures under `<root>/<sandboxId>/<kind>-<time>-<random>` (root: $AENV_HOME/captures). */
export class LocalCaptureDirs implements CaptureDirs {
  constructor(private readonly root: string) {}

  allocate(sandboxId: string, kind: CaptureKind): string {
    return path.join(this.root, sandboxId, `${kind}-${Date.now()}-${newSandboxId(6)}`);
  }

  complete(dir: string): boolean {
    return existsSync(path.join(dir, CAPTURE_META_FILE));
  }

  async remove(dir: string): Promise<void> {
    await rm(dir, { recursive: true, force: true });
  }

  async removeAll(sandboxId: string): Promise<void> {
    await rm(path.join(this.root, sandboxId), { recursive: true, force: true });
  }
}

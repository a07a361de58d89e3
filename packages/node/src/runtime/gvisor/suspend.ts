import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CaptureSource } from './checkpoint.js';
import type { RunscFlags } from './runsc.js';

/**
 * What a checkpoint still owed to a suspended sandbox needs: written into its bundle directory
 * before `runsc pause`, so that a driver started after this node's process died (the sandbox's
 * processes outlive it) can take that checkpoint before it reclaims the sandbox.
 */
export interface SuspendedSandbox {
  readonly captureDir: string;
  readonly source: CaptureSource;
  readonly flags: RunscFlags;
}

const FILE = 'suspended.json';

export async function markSuspended(bundleDir: string, s: SuspendedSandbox): Promise<void> {
  await writeFile(join(bundleDir, FILE), JSON.stringify(s), { mode: 0o600 });
}

/** The mark of a sandbox suspended ahead of a checkpoint it did not get, if there is one. */
export async function readSuspended(bundleDir: string): Promise<SuspendedSandbox | undefined> {
  const text = await readFile(join(bundleDir, FILE), 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  return text === undefined ? undefined : (JSON.parse(text) as SuspendedSandbox);
}

/** The checkpoint is taken, or the sandbox runs again: nothing is owed any more. */
export async function clearSuspended(bundleDir: string): Promise<void> {
  await rm(join(bundleDir, FILE), { force: true });
}

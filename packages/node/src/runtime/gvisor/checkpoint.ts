import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { CAPTURE_FORMAT, CaptureInvalidError, listCaptureFiles, writeCaptureMeta } from '@agentenv/snapshot';
import type {
  Capture,
  CaptureMeta,
  CheckpointOptions,
  InitProcess,
  ReadOnlyMount,
  SandboxHandle,
  SandboxVolume,
} from '../driver.js';
import { CheckpointError, InvalidRequestError } from '../errors.js';
import { describeFailure, isConnectedStateError, type CommandResult } from './runsc.js';

export type Compression = 'none' | 'flate';

/** What a capture records about the sandbox it was taken from. */
export interface CaptureSource {
  readonly handle: SandboxHandle;
  readonly layers: readonly string[];
  readonly mounts: readonly ReadOnlyMount[];
  readonly volumes: readonly SandboxVolume[];
  readonly init: InitProcess;
  readonly hostname: string;
}

export interface CheckpointRun {
  readonly driver: string;
  readonly runtimeVersion: string;
  readonly settings: Readonly<Record<string, string>>;
  readonly compression: Compression;
  /** Retries of a checkpoint refused because a connection was still open (the proxy drains them). */
  readonly retries: number;
  /** One `runsc checkpoint` with these arguments appended. */
  readonly runsc: (args: string[]) => Promise<CommandResult>;
}

/** runsc's name for each setting (flate at its fastest level: the default, measured here). */
const COMPRESSION_FLAG: Record<Compression, string> = { none: 'none', flate: 'flate-best-speed' };

/**
 * `runsc checkpoint` into a fresh directory beside `opts.dir`, retried while runsc refuses because
 * of a connected endpoint, then capture.json, then the rename into place: a directory at
 * `opts.dir` is always a complete capture. Throws CheckpointError (or InvalidRequestError) with
 * nothing left on disk; whether the sandbox survived a failure is for the caller to check.
 */
export async function checkpointInto(
  source: CaptureSource,
  opts: CheckpointOptions,
  run: CheckpointRun,
): Promise<Capture> {
  const exists = await stat(opts.dir).then(
    () => true,
    () => false,
  );
  if (exists) throw new InvalidRequestError(`capture directory ${opts.dir} already exists`);
  const partial = `${opts.dir}.partial-${randomBytes(4).toString('hex')}`;
  const id = source.handle.id;
  await mkdir(partial, { recursive: true });
  try {
    const args = [
      'checkpoint',
      '--image-path',
      partial,
      `--compression=${COMPRESSION_FLAG[run.compression]}`,
      ...(opts.leaveRunning ? ['--leave-running'] : []),
      id,
    ];
    let r: CommandResult | null = null;
    for (let attempt = 0; attempt <= run.retries; attempt++) {
      if (attempt > 0) await new Promise((res) => setTimeout(res, 50 * 2 ** attempt));
      r = await run.runsc(args);
      if (r.code === 0 || !isConnectedStateError(r.stderr + r.stdout)) break;
      await rm(partial, { recursive: true, force: true });
      await mkdir(partial, { recursive: true });
    }
    if (!r || r.code !== 0) {
      throw new CheckpointError(
        r ? describeFailure('runsc checkpoint', r) : 'checkpoint not attempted',
        r ? (r.stderr || r.stdout).trim() : '',
      );
    }
    const meta: CaptureMeta = {
      format: CAPTURE_FORMAT,
      driver: run.driver,
      runtimeVersion: run.runtimeVersion,
      createdAt: new Date().toISOString(),
      sourceId: id,
      resources: source.handle.resources,
      layers: source.layers,
      mounts: source.mounts,
      volumes: source.volumes,
      init: source.init,
      envdPort: source.handle.envdPort,
      hostname: source.hostname,
      settings: { ...run.settings, compression: run.compression },
      files: await listCaptureFiles(partial),
    };
    await writeCaptureMeta(partial, meta);
    await rename(partial, opts.dir);
    return { dir: opts.dir, meta };
  } catch (e) {
    await rm(partial, { recursive: true, force: true });
    if (e instanceof CheckpointError || e instanceof InvalidRequestError) throw e;
    throw new CheckpointError(`checkpoint of ${id} failed: ${(e as Error).message}`, undefined, { cause: e });
  }
}

/** Throws CaptureInvalidError unless this driver, on this runtime build and medium, can restore it. */
export function checkRestorable(
  meta: CaptureMeta,
  here: { driver: string; runtimeVersion: string; upper: string },
): void {
  if (meta.driver !== here.driver) throw new CaptureInvalidError(`capture was made by driver ${meta.driver}`);
  if (meta.runtimeVersion !== here.runtimeVersion) {
    throw new CaptureInvalidError(
      `capture was made by runsc ${meta.runtimeVersion}; this host runs ${here.runtimeVersion} (images only restore under the same build)`,
    );
  }
  if ((meta.settings.upper ?? 'memory') !== here.upper) {
    throw new CaptureInvalidError(
      `capture's writable layer is in ${meta.settings.upper}; this driver uses ${here.upper}`,
    );
  }
}

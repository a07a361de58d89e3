import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { finished, type Readable, type Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { packageFile, runProcess } from '../util/index.js';

/** Built by `npm run build:native -w @agentenv/node` from native/aenv-volfs.c. */
export const VOLFS_PATH = packageFile('native/build/aenv-volfs');

/** What aenv-volfs refused: the errno's name, and whether PATH itself or a parent failed. */
export class VolfsError extends Error {
  constructor(
    readonly code: string,
    readonly at: 'target' | 'parent' | 'root',
  ) {
    super(`aenv-volfs: ${code} (${at})`);
  }
}

/** The entry aenv-volfs prints (times in ms since the epoch). */
export interface RawEntry {
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'unknown';
  size: number;
  mode: number;
  uid: number;
  gid: number;
  atimeMs: number;
  mtimeMs: number;
  ctimeMs: number;
  target?: string;
}

/** A result line, or the helper's refusal thrown as a VolfsError. */
function parseLine<T>(line: string | undefined, stderr: string): T {
  let out: unknown;
  try {
    out = JSON.parse(line ?? '');
  } catch {
    throw new Error(`aenv-volfs failed: ${stderr.trim() || 'no output'}`);
  }
  const err = out as { error?: string; at?: VolfsError['at'] };
  if (typeof err.error === 'string') throw new VolfsError(err.error, err.at ?? 'target');
  return out as T;
}

/** Relative path of segments as the helper takes it ("." for the volume root). */
const rel = (segments: readonly string[]) => (segments.length ? segments.join('/') : '.');

/**
 * The content API's file operations, each run by aenv-volfs (see native/aenv-volfs.c), which
 * resolves every path beneath the volume root with openat2 and acts on what it resolved.
 */
export class Volfs {
  constructor(
    private readonly root: string,
    private readonly helper = VOLFS_PATH,
  ) {}

  async run<T>(op: string, segments: readonly string[], args: readonly (string | number)[] = []): Promise<T> {
    const r = await runProcess(this.helper, [this.root, op, rel(segments), ...args.map(String)]);
    return parseLine<T>(r.stdout.split('\n')[0], r.stderr);
  }

  /** A regular file's size and a stream of its bytes. */
  async read(segments: readonly string[]): Promise<{ stream: Readable; size: number }> {
    const child = this.spawn(['read', rel(segments)]);
    child.stdin.end();
    const stderr = collect(child.stderr).catch(() => '');
    const header = await Promise.race([firstLine(child.stdout), failedToStart(child)]);
    try {
      const size = parseLine<{ size: number }>(header, header === undefined ? await stderr : '').size;
      return { stream: child.stdout, size };
    } catch (err) {
      child.stdout.destroy();
      throw err;
    }
  }

  /**
   * `body` through `meter` into the new file `tmp` beside the target; the caller commits it.
   * Rejects with the helper's refusal when it gave one (e.g. ENOSPC), else with the stream's.
   */
  async write(
    segments: readonly string[],
    tmp: string,
    owner: { uid: number; gid: number; mode: number },
    body: Readable,
    meter: Transform,
  ): Promise<void> {
    const child = this.spawn(['write', rel(segments), tmp, owner.uid, owner.gid, owner.mode].map(String));
    // Settled now, awaited later: none may reject unobserved while the upload streams.
    const stdout = collect(child.stdout).catch(() => '');
    const stderr = collect(child.stderr).catch(() => '');
    const exited = (once(child, 'close') as Promise<[number | null]>).catch((e: unknown) => e as Error);
    const failed = await feed(body, meter, child.stdin);
    // An aborted upload ends stdin as a complete one would: the file stays uncommitted, and is
    // removed by the caller.
    if (failed) child.kill('SIGKILL');
    const closed = await exited;
    if (closed instanceof Error) throw closed;
    if (closed[0] === 0 && !failed) return;
    const line = (await stdout).split('\n')[0];
    if (line) parseLine(line, await stderr);
    throw failed ?? new Error(`aenv-volfs failed: ${(await stderr).trim()}`);
  }

  private spawn(args: readonly string[]): ChildProcessWithoutNullStreams {
    return spawn(this.helper, [this.root, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  }
}

/**
 * `body` through `meter` into `sink`; what failed, if anything. A failure leaves `body` (the
 * request) drained rather than destroyed, so the client's connection outlives a refused upload
 * and gets its answer.
 */
async function feed(body: Readable, meter: Transform, sink: Writable): Promise<unknown> {
  finished(body, (err) => {
    if (err) meter.destroy(err);
  });
  body.pipe(meter);
  try {
    await pipeline(meter, sink);
    return undefined;
  } catch (err) {
    body.unpipe(meter);
    body.resume();
    return err;
  }
}

/** Rejects when the helper cannot be started (not built); never settles otherwise. */
function failedToStart(child: ChildProcessWithoutNullStreams): Promise<never> {
  return new Promise((_resolve, reject) => child.once('error', reject));
}

async function collect(stream: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(chunk as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/** The first line of `stdout`; what follows it stays in the (paused) stream. */
function firstLine(stdout: Readable): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const done = (line: string | undefined) => {
      stdout.off('data', onData).off('end', onEnd).off('error', reject);
      resolve(line);
    };
    const onData = (chunk: Buffer) => {
      const nl = chunk.indexOf(0x0a);
      if (nl < 0) return void parts.push(chunk);
      stdout.pause();
      parts.push(chunk.subarray(0, nl));
      if (nl + 1 < chunk.length) stdout.unshift(chunk.subarray(nl + 1));
      done(Buffer.concat(parts).toString('utf8'));
    };
    const onEnd = () => done(parts.length ? Buffer.concat(parts).toString('utf8') : undefined);
    stdout.on('data', onData).once('end', onEnd).once('error', reject);
  });
}

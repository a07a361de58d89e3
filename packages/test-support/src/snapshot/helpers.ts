import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import {
  CAPTURE_FORMAT,
  writeCaptureMeta,
  type CaptureMeta,
  type RepositoryConfig,
} from '@agentenv/snapshot';
import { REPO_ROOT, sameSourceFlags, siblingScript } from '../paths.js';

export { REPO_ROOT };

/** A scratch directory under the OS temp dir, removed by the returned function. */
export async function scratchDir(tag: string): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), `aenv-snap-${tag}-`));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** Writes a capture directory the way a driver does (runtime files, then capture.json). */
export async function writeCapture(dir: string, files: Record<string, Buffer>): Promise<CaptureMeta> {
  await mkdir(dir, { recursive: true });
  for (const [name, data] of Object.entries(files)) await writeFile(join(dir, name), data);
  const meta: CaptureMeta = {
    format: CAPTURE_FORMAT,
    driver: 'gvisor',
    runtimeVersion: 'test',
    createdAt: new Date().toISOString(),
    sourceId: 'aenv-00000000000000000000',
    resources: { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 },
    layers: ['/nonexistent/layer'],
    mounts: [],
    init: { args: ['/bin/true'] },
    envdPort: 49983,
    hostname: 'aenv',
    settings: { upper: 'memory' },
    files: Object.entries(files)
      .map(([name, data]) => ({ name, bytes: data.length }))
      .sort((a, b) => (a.name < b.name ? -1 : 1)),
  };
  await writeCaptureMeta(dir, meta);
  return meta;
}

/** Hash of every runtime file of a capture directory (capture.json left out). */
export async function captureDigest(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) {
    if (name === 'capture.json') continue;
    out[name] = createHash('sha256')
      .update(await readFile(join(dir, name)))
      .digest('hex');
  }
  return out;
}

/** Total size of the regular files under a directory. */
export async function duBytes(dir: string): Promise<number> {
  let n = 0;
  for (const ent of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (ent.isFile()) n += (await stat(join(ent.parentPath, ent.name))).size;
  }
  return n;
}

/** Page-structured test memory: `pages` pages of random content. */
export function randomPages(pages: number, pageBytes = 4096): Buffer {
  return randomBytes(pages * pageBytes);
}

export interface S3Server {
  readonly endpoint: string;
  readonly bucket: string;
  readonly dir: string;
  config(prefix: string, extra?: Record<string, unknown>): RepositoryConfig;
  /** Requests served so far by `METHOD kind` (kind `blob`: chunks and manifests; else `other`). */
  requests(): Promise<Record<string, number>>;
  close(): Promise<void>;
}

/**
 * A real S3-compatible server on 127.0.0.1: s3rver in its own node process (s3-server.ts), run
 * with --openssl-legacy-provider because s3rver encrypts list continuation tokens with DES,
 * which OpenSSL 3 only has in its legacy provider (without it every truncated LIST is a 500).
 * It checks the access key id (S3RVER) but not SigV4 signatures, and ignores If-None-Match.
 */
export async function startS3(): Promise<S3Server> {
  const { dir, remove } = await scratchDir('s3rver');
  const bucket = 'aenv-test';
  const child = spawn(
    process.execPath,
    [
      '--openssl-legacy-provider',
      ...sameSourceFlags(import.meta.url),
      '--import',
      'tsx',
      siblingScript(import.meta.url, 's3-server'),
      JSON.stringify({ dir, bucket, log: !!process.env.AENV_S3RVER_LOG }),
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('s3rver did not start within 30 s')), 30_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^PORT (\d+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
      if (process.env.AENV_S3RVER_LOG) process.stdout.write(d);
    });
    child.on('exit', (code) => reject(new Error(`s3rver exited with ${code} before listening`)));
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    dir,
    config: (prefix, extra = {}) => ({
      backend: 'oss',
      endpoint,
      bucket,
      region: 'us-east-1',
      prefix,
      addressingStyle: 'path',
      accessKeyId: 'S3RVER',
      secretAccessKey: 'S3RVER',
      ...extra,
    }),
    requests: async () => (await (await fetch(`${endpoint}/__requests`)).json()) as Record<string, number>,
    close: async () => {
      if (child.exitCode === null) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await gone;
      }
      await remove();
    },
  };
}

/**
 * Per-file fixtures: one S3 server for the file (started in beforeAll) and scratch directories,
 * all removed in afterAll.
 */
export function fileFixtures(): { readonly s3: S3Server; scratch(tag: string): Promise<string> } {
  let server: S3Server | null = null;
  const cleanups: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    server = await startS3();
  });
  afterAll(async () => {
    await server?.close();
    for (const c of cleanups.splice(0)) await c();
  });
  return {
    get s3(): S3Server {
      if (!server) throw new Error('the S3 server starts in beforeAll');
      return server;
    },
    async scratch(tag: string): Promise<string> {
      const s = await scratchDir(tag);
      cleanups.push(s.remove);
      return s.dir;
    },
  };
}

/** Runs child.ts in a separate node process (tsx loader) with a JSON argument. */
export function spawnChild(args: Record<string, unknown>) {
  return spawn(
    process.execPath,
    [
      ...sameSourceFlags(import.meta.url),
      '--import',
      'tsx',
      siblingScript(import.meta.url, 'child'),
      JSON.stringify(args),
    ],
    {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
}

export function waitExit(
  child: ReturnType<typeof spawnChild>,
): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
}

/** Node config lines that put the snapshot repository on S3 (s3rver's fixed credentials). */
export function s3RepositoryToml(o: {
  endpoint: string;
  bucket: string;
  prefix: string;
  /** Left out of the file when false (the node must then refuse the config). */
  region?: string | false;
}): string[] {
  const region = o.region ?? 'us-east-1';
  return [
    '[snapshot]',
    'repository_backend = "oss"',
    '[backend.oss]',
    `endpoint = "${o.endpoint}"`,
    `bucket = "${o.bucket}"`,
    ...(region === false ? [] : [`region = "${region}"`]),
    `prefix = "${o.prefix}"`,
    'addressing_style = "path"',
    'access_key_id = "S3RVER"',
    'access_key_secret = "S3RVER"',
  ];
}

/** A node config file whose snapshot repository is that S3 bucket (see s3RepositoryToml). */
export function writeS3RepositoryConfig(file: string, o: Parameters<typeof s3RepositoryToml>[0]): string {
  writeFileSync(file, [...s3RepositoryToml(o), ''].join('\n'));
  return file;
}

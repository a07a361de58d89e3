/**
 * Test images built from scratch: tar layers (tar-stream), OCI image layouts on disk (written by
 * hand: oci-layout, index.json, blobs/sha256/…), pushed to a registry with `skopeo copy`.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';

const run = promisify(execFile);

export const BUSYBOX = '/bin/busybox';

export interface TarItem {
  readonly name: string;
  readonly type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device' | 'fifo';
  readonly content?: string | Buffer;
  readonly mode?: number;
  readonly linkname?: string;
  readonly uid?: number;
  readonly gid?: number;
  readonly mtime?: Date;
  readonly pax?: Record<string, string>;
  readonly devmajor?: number;
  readonly devminor?: number;
}

/** An uncompressed tar of `items`, in order. */
export async function tarOf(items: readonly TarItem[]): Promise<Buffer> {
  const pack = tar.pack();
  const out: Buffer[] = [];
  const done = (async () => {
    for await (const chunk of pack as AsyncIterable<Buffer>) out.push(chunk);
  })();
  for (const it of items) {
    const type = it.type ?? 'file';
    const body =
      it.content !== undefined ? Buffer.from(it.content) : type === 'file' ? Buffer.alloc(0) : undefined;
    await new Promise<void>((resolve, reject) => {
      const header = {
        name: it.name,
        type,
        mode: it.mode ?? (type === 'directory' ? 0o755 : 0o644),
        uid: it.uid ?? 0,
        gid: it.gid ?? 0,
        mtime: it.mtime ?? new Date('2024-01-02T03:04:05Z'),
        ...(it.linkname !== undefined ? { linkname: it.linkname } : {}),
        ...(it.pax ? { pax: it.pax } : {}),
        ...(it.devmajor !== undefined ? { devmajor: it.devmajor, devminor: it.devminor ?? 0 } : {}),
        ...(body ? { size: body.length } : {}),
      } as Partial<tar.Header> & { name: string };
      if (body) pack.entry(header, body, (e) => (e ? reject(e) : resolve()));
      else pack.entry(header, (e) => (e ? reject(e) : resolve()));
    });
  }
  pack.finalize();
  await done;
  return Buffer.concat(out);
}

export const sha256 = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export interface Blob {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly data: Buffer;
}

export interface TestImage {
  readonly manifest: Blob;
  readonly config: Blob;
  readonly layers: readonly Blob[];
  /** sha256 of each uncompressed layer. */
  readonly diffIds: readonly string[];
}

const blob = (mediaType: string, data: Buffer): Blob => ({
  mediaType,
  digest: sha256(data),
  size: data.length,
  data,
});
const desc = (b: Blob) => ({ mediaType: b.mediaType, digest: b.digest, size: b.size });

/** An OCI image from uncompressed layer tars (gzipped here). */
export function ociImage(
  tars: readonly Buffer[],
  cfg: {
    architecture?: string;
    variant?: string;
    env?: string[];
    cmd?: string[];
    entrypoint?: string[];
    workingDir?: string;
    user?: string;
  } = {},
): TestImage {
  const layers = tars.map((t) => blob('application/vnd.oci.image.layer.v1.tar+gzip', gzipSync(t)));
  const diffIds = tars.map((t) => sha256(t));
  const config = blob(
    'application/vnd.oci.image.config.v1+json',
    Buffer.from(
      JSON.stringify({
        architecture: cfg.architecture ?? 'amd64',
        ...(cfg.variant ? { variant: cfg.variant } : {}),
        os: 'linux',
        config: {
          Env: cfg.env ?? ['PATH=/bin'],
          ...(cfg.cmd ? { Cmd: cfg.cmd } : {}),
          ...(cfg.entrypoint ? { Entrypoint: cfg.entrypoint } : {}),
          WorkingDir: cfg.workingDir ?? '/',
          ...(cfg.user ? { User: cfg.user } : {}),
        },
        rootfs: { type: 'layers', diff_ids: diffIds },
        history: tars.map(() => ({ created_by: 'test' })),
      }),
    ),
  );
  const manifest = blob(
    'application/vnd.oci.image.manifest.v1+json',
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: desc(config),
        layers: layers.map(desc),
      }),
    ),
  );
  return { manifest, config, layers, diffIds };
}

/** An OCI image index over `images`, each with its platform. */
export function ociIndex(
  images: readonly { image: TestImage; platform: { os: string; architecture: string; variant?: string } }[],
): Blob {
  return blob(
    'application/vnd.oci.image.index.v1+json',
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: images.map((i) => ({ ...desc(i.image.manifest), platform: i.platform })),
      }),
    ),
  );
}

/** Writes an OCI image layout holding `images` and `indexes`, each top-level entry tagged. */
export async function writeLayout(
  dir: string,
  entries: readonly { tag: string; top: Blob; blobs: readonly Blob[] }[],
): Promise<void> {
  await mkdir(join(dir, 'blobs', 'sha256'), { recursive: true });
  await writeFile(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  for (const e of entries) {
    for (const b of [e.top, ...e.blobs])
      await writeFile(join(dir, 'blobs', 'sha256', b.digest.slice(7)), b.data);
  }
  await writeFile(
    join(dir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      manifests: entries.map((e) => ({
        ...desc(e.top),
        annotations: { 'org.opencontainers.image.ref.name': e.tag },
      })),
    }),
  );
}

export const imageBlobs = (i: TestImage): Blob[] => [i.config, ...i.layers];

/** `skopeo copy oci:<layout>:<tag> docker://<dest>` over plain HTTP. */
export async function skopeoPush(
  layout: string,
  tag: string,
  dest: string,
  opts: { all?: boolean; format?: 'v2s2' | 'oci'; creds?: string } = {},
): Promise<void> {
  const args = [
    '--insecure-policy',
    'copy',
    '--quiet',
    '--dest-tls-verify=false',
    ...(opts.all ? ['--all'] : []),
    ...(opts.format ? ['--format', opts.format] : []),
    ...(opts.creds ? ['--dest-creds', opts.creds] : []),
    `oci:${layout}:${tag}`,
    `docker://${dest}`,
  ];
  await run('skopeo', args, { timeout: 120_000 }).catch((e: Error & { stderr?: string }) => {
    throw new Error(`skopeo ${args.join(' ')} failed: ${e.stderr ?? e.message}`);
  });
}

/** The base layer: a tiny busybox root filesystem plus files that upper layers delete or hide. */
export async function baseLayer(): Promise<Buffer> {
  const busybox = await readFile(BUSYBOX);
  return tarOf([
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', content: busybox, mode: 0o755 },
    { name: 'bin/sh', type: 'symlink', linkname: 'busybox' },
    { name: 'bin/cat', type: 'symlink', linkname: '/bin/busybox' },
    { name: 'bin/ls', type: 'symlink', linkname: 'busybox' },
    { name: 'etc/', type: 'directory' },
    { name: 'etc/passwd', content: 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n' },
    { name: 'etc/group', content: 'root:x:0:\nuser:x:1000:\n' },
    { name: 'etc/hello', content: 'hello from the base layer\n' },
    { name: 'etc/removed.txt', content: 'deleted by layer 2\n' },
    { name: 'tmp/', type: 'directory', mode: 0o1777 },
    { name: 'home/user/', type: 'directory', uid: 1000, gid: 1000, mode: 0o700 },
    { name: 'home/user/notes', content: 'mine\n', uid: 1000, gid: 1000, mode: 0o600 },
    { name: 'data/old/a.txt', content: 'a\n' },
    { name: 'data/old/b.txt', content: 'b\n' },
    { name: 'data/kept.txt', content: 'kept\n' },
    { name: 'opq/', type: 'directory' },
    { name: 'opq/lower.txt', content: 'hidden by the opaque marker\n' },
    { name: 'opq/sub/deep.txt', content: 'also hidden\n' },
  ]);
}

/** Layer 2: deletes a file and a directory, makes /opq opaque, changes /etc/hello. */
export async function whiteoutLayer(): Promise<Buffer> {
  return tarOf([
    { name: 'etc/', type: 'directory' },
    { name: 'etc/.wh.removed.txt' },
    { name: 'etc/hello', content: 'hello from layer 2\n' },
    { name: 'data/', type: 'directory' },
    { name: 'data/.wh.old' },
    { name: 'opq/', type: 'directory' },
    { name: 'opq/.wh..wh..opq' },
    { name: 'opq/upper.txt', content: 'from layer 2\n' },
  ]);
}

/** Layer 3: hard link, setuid file, a re-created path, xattr. */
export async function topLayer(): Promise<Buffer> {
  return tarOf([
    { name: 'data/old/', type: 'directory' },
    { name: 'data/old/new.txt', content: 'recreated after the whiteout\n' },
    { name: 'usr/bin/tool', content: '#!/bin/sh\necho tool\n', mode: 0o4755 },
    { name: 'usr/bin/tool-link', type: 'link', linkname: 'usr/bin/tool' },
    { name: 'usr/bin/cap', content: 'x', pax: { 'SCHILY.xattr.user.test': 'value-1' } },
  ]);
}

/** A layer of `n` incompressible bytes (for disk-full and timing tests). */
export async function randomLayer(n: number, name = 'random.bin'): Promise<Buffer> {
  return tarOf([{ name, content: randomBytes(n) }]);
}

/**
 * What sandboxes from the busybox test images need to run E2B SDK commands and build steps: the
 * `/bin/bash` the SDK starts (a shim to busybox sh) and the applets the tests call.
 */
export async function shellLayer(): Promise<Buffer> {
  const applets = ['mkdir', 'chmod', 'chown', 'whoami', 'ps', 'grep', 'test', 'sleep', 'echo', 'pwd', 'id'];
  return tarOf([
    { name: 'bin/bash', content: '#!/bin/sh\nexec /bin/sh "$@"\n', mode: 0o755 },
    ...applets.map((a) => ({ name: `bin/${a}`, type: 'symlink' as const, linkname: 'busybox' })),
    { name: 'root/', type: 'directory', mode: 0o700 },
  ]);
}

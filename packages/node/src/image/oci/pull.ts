import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LayerStore, pidAlive } from '../layer-store.js';
import { forEachLimit, silentLog, type Log } from '../../util/index.js';
import { credentialsFromAuthFile, defaultAuthFile, type Credentials } from './auth.js';
import { LayerCache, OCI_LAYER_PREFIX } from './cache.js';
import { errnoIn, OciError } from './errors.js';
import {
  parseConfig,
  parseManifest,
  selectPlatform,
  type Descriptor,
  type ImageConfig,
  type ImageManifest,
} from './manifest.js';
import { formatPlatform, hostPlatform, parsePlatform, platformMatches, type Platform } from './platform.js';
import { formatReference, parseReference, type ImageReference } from './reference.js';
import { RegistryClient, type RetryOptions } from './registry.js';
import { unpackLayer, type UnpackResult } from './unpack.js';

export interface ImageStoreOptions {
  /** $AENV_HOME: unpacked layers go to `layers/` (the LayerStore templates use), the rest to `images/`. */
  readonly home: string;
  /** Bound of the layer cache in bytes (`image.cache.capacity_gb`); default unbounded. */
  readonly capacityBytes?: number;
  /** docker-style config.json with `auths`; default $DOCKER_CONFIG/config.json or ~/.docker/config.json. */
  readonly authFile?: string;
  /** Registries (host[:port]) spoken to over plain HTTP besides loopback ones. */
  readonly insecureRegistries?: readonly string[];
  readonly retry?: RetryOptions;
  /** Idle timeout of one HTTP request (default 30 s). */
  readonly timeoutMs?: number;
  /** Layers downloaded at once (default 3). */
  readonly concurrency?: number;
  /** Keep compressed blobs after unpacking (default false: only the unpacked layer is kept). */
  readonly keepBlobs?: boolean;
  readonly log?: Log;
}

export interface PullProgress {
  /** Compressed layer digest. */
  readonly layer: string;
  /** Position in the image, 0 = lowest. */
  readonly index: number;
  readonly count: number;
  /** download: bytes of the compressed blob; unpack: compressed bytes read so far; cached: already present. */
  readonly phase: 'download' | 'unpack' | 'cached' | 'done';
  readonly done: number;
  readonly total: number;
}

export interface PullOptions {
  /** Credentials for the reference's registry (else the auth file's, else anonymous). */
  readonly credentials?: Credentials;
  /** `linux/amd64`, `linux/arm64/v8`, … (default: linux and this host's architecture). */
  readonly platform?: string | Platform;
  readonly onProgress?: (p: PullProgress) => void;
  /** Pin the image's layers for this owner (durably) once pulled, atomically with the pull. */
  readonly pinAs?: string;
  readonly signal?: AbortSignal;
  /** Called before a request is retried. */
  readonly onRetry?: (info: { attempt: number; delayMs: number; reason: string }) => void;
}

export interface PulledImage {
  /** The reference as given, fully qualified (`docker.io/library/busybox:latest`). */
  readonly reference: string;
  /** Digest of the image manifest that was pulled (for the selected platform). */
  readonly digest: string;
  /** Digest of the index / manifest list the platform was selected from, if any. */
  readonly indexDigest?: string;
  readonly platform: Platform;
  readonly config: ImageConfig;
  /** Unpacked layer root directories, lowest first, in overlayfs form: give them to mountLayers / StartRequest.layers. */
  readonly layers: readonly string[];
  /** LayerStore / LayerCache ids of `layers` (pin these). */
  readonly layerIds: readonly string[];
  /** Bytes downloaded by this pull (0 when every layer was cached) and the image's compressed size. */
  readonly downloadedBytes: number;
  readonly compressedBytes: number;
}

const CONFIG_LIMIT = 8 << 20;
const BLOB_DIR = join('images', 'blobs', 'sha256');

/** LayerStore id of an unpacked OCI layer: keyed by diff id, so any compression of it shares the directory. */
export function layerIdFor(diffId: string): string {
  return `${OCI_LAYER_PREFIX}${diffId.replace(':', '-')}`;
}

interface LayerSource {
  kind: 'oci-layer';
  digest: string;
  diffId: string;
  mediaType: string;
  from: string;
  unpacked?: UnpackResult;
}

/**
 * Pulls images from registries into content-addressed, read-only layers on this node and keeps
 * them in a bounded cache. Layers are keyed by diff id in the LayerStore under `$home/layers`
 * (each one unpacked once, then shared by every template and sandbox that uses it); small blobs
 * (manifests, configs) stay under `$home/images/blobs`. One instance per node.
 */
export class ImageStore {
  readonly layers: LayerStore;
  readonly cache: LayerCache;
  private readonly blobDir: string;
  private readonly inFlight = new Map<string, Promise<void>>();
  private started: Promise<void> | null = null;
  private readonly log: Log;

  constructor(private readonly opts: ImageStoreOptions) {
    this.layers = new LayerStore(join(opts.home, 'layers'));
    this.cache = new LayerCache(
      this.layers,
      join(opts.home, 'images', 'layer-cache.json'),
      opts.capacityBytes ?? Number.POSITIVE_INFINITY,
    );
    this.blobDir = join(opts.home, BLOB_DIR);
    this.log = opts.log ?? silentLog;
  }

  private blobPath(digest: string): string {
    return join(this.blobDir, digest.replace(/^sha256:/, ''));
  }

  private async client(ref: ImageReference, opts: PullOptions): Promise<RegistryClient> {
    let credentials = opts.credentials;
    if (!credentials) {
      credentials = await credentialsFromAuthFile(
        this.opts.authFile ?? defaultAuthFile(),
        ref.registry,
      ).catch((e: Error) => {
        throw new OciError('unauthorized', e.message);
      });
    }
    return new RegistryClient(ref.registry, {
      ...(credentials ? { credentials } : {}),
      insecure: this.opts.insecureRegistries?.includes(ref.registry) ?? false,
      ...(this.opts.retry ? { retry: this.opts.retry } : {}),
      ...(this.opts.timeoutMs ? { timeoutMs: this.opts.timeoutMs } : {}),
      ...(opts.onRetry ? { onRetry: opts.onRetry } : {}),
    });
  }

  /** A small verified blob (manifest, config) from the local store, if present. */
  private async localBlob(digest: string): Promise<Buffer | null> {
    return readFile(this.blobPath(digest)).catch(() => null);
  }

  private async storeBlob(digest: string, body: Buffer): Promise<void> {
    await mkdir(this.blobDir, { recursive: true });
    const tmp = `${this.blobPath(digest)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      await writeFile(tmp, body);
      await rename(tmp, this.blobPath(digest));
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /**
   * Pulls `reference` for one platform and returns its runtime config and its unpacked layers
   * (lowest first). Layers already present are reused; missing ones are downloaded (verified
   * against their digest), unpacked (verified against their diff id) and committed atomically.
   */
  async pull(reference: string, opts: PullOptions = {}): Promise<PulledImage> {
    const ref = parseReference(reference);
    const name = formatReference(ref);
    try {
      return await this.doPull(ref, name, opts);
    } catch (e) {
      throw this.translate(e, name);
    }
  }

  private async doPull(ref: ImageReference, name: string, opts: PullOptions): Promise<PulledImage> {
    const wanted =
      typeof opts.platform === 'string' ? parsePlatform(opts.platform) : (opts.platform ?? hostPlatform());
    this.started ??= Promise.all([this.cache.load(), this.sweep()]).then(
      () => undefined,
      (e: unknown) => {
        this.started = null;
        throw e;
      },
    );
    await this.started;
    const client = await this.client(ref, opts);
    const signal = opts.signal;

    // Manifest, through an index if the reference names one. A digest seen before needs no network.
    const fetchManifest = async (r: string) => {
      if (r.startsWith('sha256:')) {
        const local = await this.localBlob(r);
        if (local) return { body: local, contentType: undefined, digest: r };
      }
      const m = await client.manifest(ref.repository, r, name, signal);
      await this.storeBlob(m.digest, m.body);
      return m;
    };
    let fetched = await fetchManifest(ref.digest ?? ref.tag ?? 'latest');
    let doc = parseManifest(fetched.body, fetched.contentType, name);
    let indexDigest: string | undefined;
    for (let depth = 0; doc.kind === 'index'; depth++) {
      if (depth >= 2) throw new OciError('unsupported', `${name}: image indexes nested too deeply`);
      indexDigest ??= fetched.digest;
      const entry = selectPlatform(doc, wanted, name);
      fetched = await fetchManifest(entry.digest);
      doc = parseManifest(fetched.body, fetched.contentType, `${name} (${entry.digest.slice(0, 19)})`);
    }
    const manifest: ImageManifest = doc;

    let configBody = await this.localBlob(manifest.config.digest);
    if (!configBody) {
      configBody = await client.blobBytes(
        ref.repository,
        manifest.config.digest,
        CONFIG_LIMIT,
        `image config of ${name}`,
        signal,
      );
      await this.storeBlob(manifest.config.digest, configBody);
    }
    const parsed = parseConfig(configBody, name);
    if (!platformMatches(wanted, parsed.platform)) {
      throw new OciError(
        'platform_mismatch',
        `${name} is built for ${formatPlatform(parsed.platform)} only; this needs ${formatPlatform(wanted)}`,
      );
    }
    if (parsed.diffIds.length !== manifest.layers.length) {
      throw new OciError(
        'registry_error',
        `${name}: manifest lists ${manifest.layers.length} layers but the config ${parsed.diffIds.length} diff ids`,
      );
    }

    const count = manifest.layers.length;
    const ids = parsed.diffIds.map(layerIdFor);
    const owner = `pull:${randomBytes(6).toString('hex')}`;
    await this.cache.pin(owner, ids, { durable: false });
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    let downloaded = 0;
    const sources: (LayerSource | null)[] = new Array<LayerSource | null>(count).fill(null);
    try {
      const tasks = manifest.layers.map((desc, index) => async () => {
        const diffId = parsed.diffIds[index]!;
        const id = ids[index]!;
        const report = (phase: PullProgress['phase'], done: number, total: number) =>
          opts.onProgress?.({ layer: desc.digest, index, count, phase, done, total });
        const n = await this.ensureLayer(client, ref, name, desc, diffId, id, controller.signal, report);
        downloaded += n;
      });
      await forEachLimit(
        tasks,
        this.opts.concurrency ?? 3,
        (t) => t(),
        () => controller.abort(),
      );
      for (let i = 0; i < count; i++) {
        const meta = await this.layers.meta(ids[i]!).catch(() => null);
        sources[i] = (meta?.source as LayerSource | undefined) ?? null;
      }
      await this.cache.touch(ids);
      await this.cache.makeRoom(0, { strict: true });
    } catch (e) {
      controller.abort();
      // Back under capacity if this pull pushed the cache over it; its layers are no longer held.
      await this.cache.unpin(owner);
      await this.cache.makeRoom(0).catch(() => undefined);
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }

    // A layer that is opaque at its root hides everything below it; identical layers repeated in
    // the stack compose the same as their topmost occurrence alone.
    let start = 0;
    sources.forEach((s, i) => {
      if (s?.unpacked?.rootOpaque) start = i;
    });
    const stack: string[] = [];
    for (let i = count - 1; i >= start; i--) if (!stack.includes(ids[i]!)) stack.unshift(ids[i]!);
    try {
      if (opts.pinAs) await this.cache.pin(opts.pinAs, stack);
    } finally {
      await this.cache.unpin(owner);
    }
    const compressedBytes = manifest.layers.reduce((a, l) => a + l.size, 0);
    this.log.info(
      `pulled ${name} (${fetched.digest.slice(0, 19)}): ${count} layers, ${downloaded} bytes downloaded`,
    );
    return {
      reference: name,
      digest: fetched.digest,
      ...(indexDigest ? { indexDigest } : {}),
      platform: parsed.platform,
      config: parsed.config,
      layers: stack.map((id) => this.layers.rootfs(id)),
      layerIds: stack,
      downloadedBytes: downloaded,
      compressedBytes,
    };
  }

  /** Makes layer `id` present: deduplicated across concurrent pulls. Returns bytes downloaded. */
  private async ensureLayer(
    client: RegistryClient,
    ref: ImageReference,
    name: string,
    desc: Descriptor,
    diffId: string,
    id: string,
    signal: AbortSignal,
    report: (phase: PullProgress['phase'], done: number, total: number) => void,
  ): Promise<number> {
    for (;;) {
      await this.cache.settled(id);
      const running = this.inFlight.get(id);
      if (running) {
        await running.catch(() => undefined);
        continue;
      }
      if (await this.layers.has(id)) {
        if (!this.cache.has(id)) {
          const meta = await this.layers.meta(id);
          const bytes = (meta.source as LayerSource | undefined)?.unpacked?.bytes;
          await this.cache.add(id, bytes ?? 0);
        }
        report('cached', desc.size, desc.size);
        return 0;
      }
      // Checked again after the await: the job below is registered synchronously.
      if (!this.inFlight.has(id)) break;
    }
    let downloaded = 0;
    const job = (async () => {
      const what = `layer ${desc.digest.slice(0, 19)} of ${name}`;
      const blob = this.blobPath(desc.digest);
      await mkdir(this.blobDir, { recursive: true });
      const haveBlob = await stat(blob).then(
        (s) => s.size === desc.size,
        () => false,
      );
      try {
        // Best effort: make room for roughly the unpacked size before writing anything.
        await this.cache.makeRoom(desc.size * 2);
        if (!haveBlob) {
          const tmp = `${blob}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
          try {
            await client.downloadBlob(ref.repository, desc.digest, desc.size, tmp, {
              signal,
              what,
              // A kept blob is reused later on the strength of its name: make it durable first.
              sync: this.opts.keepBlobs ?? false,
              onProgress: (p) => report('download', p.done, p.total),
            });
            await rename(tmp, blob);
          } finally {
            await rm(tmp, { force: true });
          }
          downloaded = desc.size;
        }
        const source: LayerSource = {
          kind: 'oci-layer',
          digest: desc.digest,
          diffId,
          mediaType: desc.mediaType,
          from: name,
        };
        await this.layers.ensure(id, source, async (rootfs) => {
          // LayerStore writes layer.json after this returns, so the unpack summary lands in it.
          source.unpacked = await unpackLayer(blob, rootfs, {
            expectedDiffId: diffId,
            what,
            onBytes: (n) => report('unpack', n, desc.size),
          });
        });
        await this.cache.add(id, (source.unpacked?.bytes ?? 0) + (this.opts.keepBlobs ? desc.size : 0));
        report('done', desc.size, desc.size);
      } finally {
        if (!this.opts.keepBlobs) await rm(blob, { force: true });
      }
    })();
    this.inFlight.set(id, job);
    try {
      await job;
    } finally {
      this.inFlight.delete(id);
    }
    return downloaded;
  }

  /** Errors of the layer store and the file system, in the pull's terms. */
  private translate(e: unknown, name: string): Error {
    const space = errnoIn(e, ['ENOSPC', 'EDQUOT']);
    if (space) {
      return new OciError(
        'disk_full',
        `pulling ${name}: no space left on ${this.opts.home} (${space}); the partial layer was removed`,
        { cause: e },
      );
    }
    if (e instanceof OciError) return e;
    const inner = (e as { cause?: unknown }).cause;
    if (inner instanceof OciError) return new OciError(inner.code, inner.message, { cause: e });
    if ((e as Error).name === 'AbortError') return e as Error;
    return new OciError('registry_error', `pulling ${name}: ${(e as Error).message}`, { cause: e });
  }

  /** Pins layers for an owner (a template id, a cold sandbox id) so eviction keeps them. */
  pin(owner: string, layerIds: readonly string[], opts?: { durable?: boolean }): Promise<void> {
    return this.cache.load().then(() => this.cache.pin(owner, layerIds, opts));
  }

  unpin(owner: string): Promise<void> {
    return this.cache.load().then(() => this.cache.unpin(owner));
  }

  /**
   * Removes leftovers of pulls interrupted by a crash: temporary blobs of processes that no
   * longer run (layer temporaries are swept by the LayerStore). Safe while pulls run.
   */
  async sweep(): Promise<void> {
    const names = await readdir(this.blobDir).catch(() => [] as string[]);
    for (const n of names) {
      const pid = Number(/\.tmp-(\d+)-[0-9a-f]+$/.exec(n)?.[1]);
      if (Number.isInteger(pid) && pid !== process.pid && !pidAlive(pid)) {
        await rm(join(this.blobDir, n), { force: true });
      }
    }
    await this.layers.sweep();
  }
}

/** One-shot convenience: `new ImageStore(opts).pull(reference, opts)`. */
export function pullImage(reference: string, opts: ImageStoreOptions & PullOptions): Promise<PulledImage> {
  return new ImageStore(opts).pull(reference, opts);
}

import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LayerStore, pidAlive, type LayerStoreOptions } from './layer-store.js';
import { forEachLimit, silentLog, type Log } from '@agentenv/common';
import { credentialsFromAuthFile, defaultAuthFile, type Credentials } from './auth.js';
import { LayerCache, OCI_LAYER_PREFIX } from './cache.js';
import { errnoIn, OciError } from './errors.js';
import {
  parseConfig,
  parseManifest,
  selectPlatform,
  type ImageConfig,
  type ImageManifest,
} from './manifest.js';
import { formatPlatform, hostPlatform, parsePlatform, platformMatches, type Platform } from './platform.js';
import { formatReference, parseReference, type ImageReference } from './reference.js';
import { RegistryClient, type RetryOptions } from './registry.js';
import { DEFAULT_UNPACK_LIMITS, ImageBudget, type UnpackLimits } from './limits.js';
import { blobPathIn, LayerFetcher, type LayerPhase, type LayerSource, type Pull } from './layer-fetch.js';

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
  /** What an image may unpack to (default DEFAULT_UNPACK_LIMITS). */
  readonly unpackLimits?: UnpackLimits;
  /** Keep compressed blobs after unpacking (default false: only the unpacked layer is kept). */
  readonly keepBlobs?: boolean;
  readonly log?: Log;
  /** Given to the layer store, whose directory the node's own builders share (LayerStoreOptions). */
  readonly unmountBelow?: LayerStoreOptions['unmountBelow'];
}

export interface PullProgress {
  /** Compressed layer digest. */
  readonly layer: string;
  /** Position in the image, 0 = lowest. */
  readonly index: number;
  readonly count: number;
  readonly phase: LayerPhase;
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

/**
 * The layers to mount (ids, lowest first) given which ones are opaque at their root: such a layer
 * hides everything below it, and identical layers repeated in the stack compose the same as their
 * topmost occurrence alone.
 */
export function layerStack(rootOpaque: readonly boolean[], ids: readonly string[]): string[] {
  const start = Math.max(0, rootOpaque.lastIndexOf(true));
  const stack: string[] = [];
  for (let i = ids.length - 1; i >= start; i--) if (!stack.includes(ids[i]!)) stack.unshift(ids[i]!);
  return stack;
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
  private readonly fetcher: LayerFetcher;
  private started: Promise<void> | null = null;
  private readonly log: Log;

  constructor(private readonly opts: ImageStoreOptions) {
    this.layers = new LayerStore(join(opts.home, 'layers'), { unmountBelow: opts.unmountBelow });
    this.cache = new LayerCache(
      this.layers,
      join(opts.home, 'images', 'layer-cache.json'),
      opts.capacityBytes ?? Number.POSITIVE_INFINITY,
    );
    this.blobDir = join(opts.home, BLOB_DIR);
    this.fetcher = new LayerFetcher({
      layers: this.layers,
      cache: this.cache,
      blobDir: this.blobDir,
      keepBlobs: opts.keepBlobs ?? false,
    });
    this.log = opts.log ?? silentLog;
  }

  private blobPath(digest: string): string {
    return blobPathIn(this.blobDir, digest);
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
    const pull: Pull = { client, ref, name, signal: opts.signal };
    const { manifest, digest, indexDigest } = await this.resolveManifest(pull, wanted);
    const parsed = await this.readConfig(pull, manifest, wanted);
    const ids = parsed.diffIds.map(layerIdFor);
    const owner = `pull:${randomBytes(6).toString('hex')}`;
    await this.cache.pin(owner, ids, { durable: false });
    let fetched: { downloaded: number; sources: (LayerSource | null)[] };
    try {
      fetched = await this.fetchLayers(pull, manifest, parsed.diffIds, ids, opts.onProgress);
    } catch (e) {
      // Back under capacity if this pull pushed the cache over it; its layers are no longer held.
      await this.cache.unpin(owner);
      await this.cache.makeRoom(0).catch(() => undefined);
      throw e;
    }
    const { downloaded } = fetched;
    const stack = layerStack(
      fetched.sources.map((source) => source?.unpacked?.rootOpaque ?? false),
      ids,
    );
    try {
      if (opts.pinAs) await this.cache.pin(opts.pinAs, stack);
    } finally {
      await this.cache.unpin(owner);
    }
    const count = manifest.layers.length;
    this.log.info(`pulled ${name} (${digest.slice(0, 19)}): ${count} layers, ${downloaded} bytes downloaded`);
    return {
      reference: name,
      digest,
      ...(indexDigest ? { indexDigest } : {}),
      platform: parsed.platform,
      config: parsed.config,
      layers: stack.map((id) => this.layers.rootfs(id)),
      layerIds: stack,
      downloadedBytes: downloaded,
      compressedBytes: manifest.layers.reduce((a, l) => a + l.size, 0),
    };
  }

  /** The image manifest for `wanted`, through an index if the reference names one. */
  private async resolveManifest(
    pull: Pull,
    wanted: Platform,
  ): Promise<{ manifest: ImageManifest; digest: string; indexDigest?: string }> {
    const { client, ref, name, signal } = pull;
    // A digest seen before needs no network.
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
    return { manifest: doc, digest: fetched.digest, ...(indexDigest ? { indexDigest } : {}) };
  }

  /** The image config, checked against the platform asked for and the manifest's layers. */
  private async readConfig(pull: Pull, manifest: ImageManifest, wanted: Platform) {
    const { client, ref, name, signal } = pull;
    const digest = manifest.config.digest;
    let body = await this.localBlob(digest);
    if (!body) {
      body = await client.blobBytes(ref.repository, digest, CONFIG_LIMIT, `image config of ${name}`, signal);
      await this.storeBlob(digest, body);
    }
    const parsed = parseConfig(body, name);
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
    return parsed;
  }

  /**
   * Makes every layer of the image present (`ids` pinned by the caller), a few at a time; the
   * first failure stops the others. Returns the bytes downloaded and each layer's source record.
   */
  private async fetchLayers(
    pull: Pull,
    manifest: ImageManifest,
    diffIds: readonly string[],
    ids: readonly string[],
    onProgress: PullOptions['onProgress'],
  ): Promise<{ downloaded: number; sources: (LayerSource | null)[] }> {
    const count = manifest.layers.length;
    const controller = new AbortController();
    const onAbort = () => controller.abort(pull.signal?.reason);
    pull.signal?.addEventListener('abort', onAbort, { once: true });
    const image = new ImageBudget(this.opts.unpackLimits ?? DEFAULT_UNPACK_LIMITS, `image ${pull.name}`);
    let downloaded = 0;
    try {
      await forEachLimit(
        manifest.layers.map((desc, index) => ({ desc, index })),
        this.opts.concurrency ?? 3,
        async ({ desc, index }) => {
          const report = (phase: PullProgress['phase'], done: number, total: number) =>
            onProgress?.({ layer: desc.digest, index, count, phase, done, total });
          const job = {
            ...pull,
            desc,
            diffId: diffIds[index]!,
            id: ids[index]!,
            signal: controller.signal,
            image,
            report,
          };
          // Read `downloaded` only after the await: the layers run concurrently.
          const n = await this.fetcher.ensure(job);
          downloaded += n;
        },
        () => controller.abort(),
      );
      const sources = await Promise.all(
        ids.map(
          async (id) =>
            ((await this.layers.meta(id).catch(() => null))?.source as LayerSource | undefined) ?? null,
        ),
      );
      // Layers unpacked by earlier pulls count too, as they recorded themselves.
      image.checkTotals(sources.flatMap((s) => (s?.unpacked ? [s.unpacked] : [])));
      await this.cache.touch(ids);
      await this.cache.makeRoom(0, { strict: true });
      return { downloaded, sources };
    } catch (e) {
      controller.abort();
      throw e;
    } finally {
      pull.signal?.removeEventListener('abort', onAbort);
    }
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

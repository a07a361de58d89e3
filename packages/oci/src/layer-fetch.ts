import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { LayerStore } from './layer-store.js';
import type { LayerCache } from './cache.js';
import type { ImageBudget } from './limits.js';
import type { Descriptor } from './manifest.js';
import type { ImageReference } from './reference.js';
import type { RegistryClient } from './registry.js';
import { unpackLayer, type UnpackResult } from './unpack.js';

/** download: bytes of the compressed blob; unpack: compressed bytes read so far; cached: already present. */
export type LayerPhase = 'download' | 'unpack' | 'cached' | 'done';

/** Where a small blob (manifest, config) or a layer's compressed blob is kept. */
export function blobPathIn(blobDir: string, digest: string): string {
  return join(blobDir, digest.replace(/^sha256:/, ''));
}

/** What a layer's layer.json records of where it came from. */
export interface LayerSource {
  kind: 'oci-layer';
  digest: string;
  diffId: string;
  mediaType: string;
  from: string;
  unpacked?: UnpackResult;
}

/** What every step of one pull talks to. */
export interface Pull {
  readonly client: RegistryClient;
  readonly ref: ImageReference;
  /** The reference, fully qualified, for messages. */
  readonly name: string;
  readonly signal?: AbortSignal | undefined;
}

/** One layer of a pull to make present. */
export interface LayerJob extends Pull {
  readonly desc: Descriptor;
  readonly diffId: string;
  readonly id: string;
  readonly signal: AbortSignal;
  /** What the pull's image may still unpack. */
  readonly image: ImageBudget;
  report(phase: LayerPhase, done: number, total: number): void;
}

export interface LayerFetcherOptions {
  readonly layers: LayerStore;
  readonly cache: LayerCache;
  readonly blobDir: string;
  /** Keep compressed blobs after unpacking. */
  readonly keepBlobs: boolean;
}

/**
 * Makes one layer present in the layer store and the cache: downloaded (verified against its
 * digest), unpacked (verified against its diff id) and committed atomically, once however many
 * pulls want it at the same time.
 */
export class LayerFetcher {
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(private readonly opts: LayerFetcherOptions) {}

  /** Makes layer `job.id` present: deduplicated across concurrent pulls. Returns bytes downloaded. */
  async ensure(job: LayerJob): Promise<number> {
    const { id, desc } = job;
    for (;;) {
      await this.opts.cache.settled(id);
      const running = this.inFlight.get(id);
      if (running) {
        await running.catch(() => undefined);
        continue;
      }
      if (await this.opts.layers.has(id)) {
        if (!this.opts.cache.has(id)) {
          const meta = await this.opts.layers.meta(id);
          const bytes = (meta.source as LayerSource | undefined)?.unpacked?.bytes;
          await this.opts.cache.add(id, bytes ?? 0);
        }
        job.report('cached', desc.size, desc.size);
        return 0;
      }
      // Checked again after the await: the job below is registered synchronously.
      if (!this.inFlight.has(id)) break;
    }
    let downloaded = 0;
    const running = this.downloadAndUnpack(job).then((n) => {
      downloaded = n;
    });
    this.inFlight.set(id, running);
    try {
      await running;
    } finally {
      this.inFlight.delete(id);
    }
    return downloaded;
  }

  /** Downloads the layer's blob (unless a kept one is there), unpacks it and adds it to the cache. */
  private async downloadAndUnpack(job: LayerJob): Promise<number> {
    const { desc, report } = job;
    const what = `layer ${desc.digest.slice(0, 19)} of ${job.name}`;
    const blob = blobPathIn(this.opts.blobDir, desc.digest);
    await mkdir(this.opts.blobDir, { recursive: true });
    const haveBlob = await stat(blob).then(
      (s) => s.size === desc.size,
      () => false,
    );
    let downloaded = 0;
    try {
      // Best effort: make room for roughly the unpacked size before writing anything.
      await this.opts.cache.makeRoom(desc.size * 2);
      if (!haveBlob) {
        const tmp = `${blob}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
        try {
          await job.client.downloadBlob(job.ref.repository, desc.digest, desc.size, tmp, {
            signal: job.signal,
            what,
            // A kept blob is reused later on the strength of its name: make it durable first.
            sync: this.opts.keepBlobs,
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
        diffId: job.diffId,
        mediaType: desc.mediaType,
        from: job.name,
      };
      await this.opts.layers.ensure(job.id, source, async (rootfs) => {
        // LayerStore writes layer.json after this returns, so the unpack summary lands in it.
        source.unpacked = await unpackLayer(blob, rootfs, {
          expectedDiffId: job.diffId,
          what,
          onBytes: (n) => report('unpack', n, desc.size),
          budget: job.image.layer(what),
        });
      });
      await this.opts.cache.add(
        job.id,
        (source.unpacked?.bytes ?? 0) + (this.opts.keepBlobs ? desc.size : 0),
      );
      report('done', desc.size, desc.size);
      return downloaded;
    } finally {
      if (!this.opts.keepBlobs) await rm(blob, { force: true });
    }
  }
}

import type { ChunkRef } from './manifest.js';

/**
 * Somewhere other than the repository that may hold capture chunks: this node's runtime cache,
 * other nodes. A store tries its sources in order for every chunk and falls back to the
 * repository; whatever a source returns is checked against the chunk's hash before it is used,
 * so a source needs no trust.
 */
export interface ChunkSource {
  /** For metrics and logs (`cache`, `peers`). */
  readonly name: string;
  /**
   * Called once per materialisation with every distinct chunk it needs, so a source can look
   * them up in bulk (which peers have which). Must not throw: a source that cannot help returns
   * a session that finds nothing.
   */
  begin(chunks: readonly ChunkRef[]): Promise<ChunkSession>;
}

export interface ChunkSession {
  /** The chunk's bytes, or null when this source has not got it (or failed to deliver it). */
  get(hash: string, bytes: number): Promise<Buffer | null>;
  /** The store found the bytes `get` gave for `hash` wrong. */
  rejected(hash: string): void;
  end(): void;
}

/** Where the chunks of each materialisation came from; `source` is a ChunkSource name or `repository`. */
export interface ChunkFetchObserver {
  fetched(source: string, bytes: number): void;
  /** A source delivered bytes that did not match the chunk's hash. */
  rejected(source: string): void;
}

/** A session that has nothing, for sources that cannot help this time. */
export const EMPTY_SESSION: ChunkSession = {
  get: () => Promise.resolve(null),
  rejected: () => undefined,
  end: () => undefined,
};

import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { ObjectRepository, type ObjectStat } from '@agentenv/snapshot';

/**
 * A snapshot repository held in memory: the real catalogue logic (records, aliases, claims,
 * blobs) of ObjectRepository over a Map of objects. The backend name is informational only; it
 * answers as a posix_fs directory would.
 */
export class MemoryObjectRepository extends ObjectRepository {
  readonly backend = 'posix_fs' as const;
  readonly location = 'memory://snapshot-repository';
  private readonly objects = new Map<string, { data: Buffer; mtimeMs: number }>();

  async open(): Promise<void> {}
  async close(): Promise<void> {}

  /** Keys of the objects stored, for tests to look at. */
  keys(prefix = ''): string[] {
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  protected async putObject(
    key: string,
    body: Buffer | { readonly path: string },
    opts: { exclusive: boolean },
  ): Promise<boolean> {
    if (opts.exclusive && this.objects.has(key)) return false;
    const data = Buffer.isBuffer(body) ? Buffer.from(body) : await readFile(body.path);
    this.objects.set(key, { data, mtimeMs: Date.now() });
    return true;
  }

  protected async getObject(key: string): Promise<{ data: Buffer; mtimeMs: number } | null> {
    return this.objects.get(key) ?? null;
  }

  protected async openObject(key: string): Promise<Readable | null> {
    const o = this.objects.get(key);
    return o ? Readable.from([o.data]) : null;
  }

  protected async statObject(key: string): Promise<ObjectStat | null> {
    const o = this.objects.get(key);
    return o ? { key, bytes: o.data.length, mtimeMs: o.mtimeMs } : null;
  }

  protected async *listObjects(prefix: string): AsyncIterable<ObjectStat> {
    for (const [key, o] of [...this.objects])
      if (key.startsWith(prefix)) yield { key, bytes: o.data.length, mtimeMs: o.mtimeMs };
  }

  protected async deleteObject(key: string): Promise<void> {
    this.objects.delete(key);
  }
}

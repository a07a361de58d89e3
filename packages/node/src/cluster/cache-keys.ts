import { captureKey } from '@agentenv/protocol/scheduler';

/** What the cache keys need of the runtime cache and the repository's records. */
export interface CacheSource {
  stats(): { entries: readonly { id: string }[] };
}
export interface RecordSource {
  getRecord(
    id: string,
  ): Promise<{ labels: Readonly<Record<string, string>>; meta: Readonly<Record<string, unknown>> }>;
}

/** What the kinds of repository records keep of their names (templates, snapshots). */
interface NamedMeta {
  template?: { names?: string[] };
  info?: { names?: string[] };
}

/**
 * The keys a node advertises for the captures in its runtime cache (`captureKey`, shared with the
 * scheduler): a built template by its id and each of its names, a snapshot by its id and each of
 * its names, a pause by its id. Records never change, so each is read once; one that cannot be
 * read yet is advertised under no key and read again next time.
 */
export class CacheKeys {
  private readonly known = new Map<string, string[]>();

  constructor(
    private readonly cache: CacheSource,
    private readonly records: RecordSource,
  ) {}

  async current(): Promise<string[]> {
    const ids = new Set(this.cache.stats().entries.map((e) => e.id));
    for (const k of this.known.keys()) if (!ids.has(k)) this.known.delete(k);
    const out = new Set<string>();
    for (const id of ids) {
      let keys = this.known.get(id);
      if (!keys) {
        keys = await this.derive(id);
        if (keys) this.known.set(id, keys);
      }
      for (const k of keys ?? []) out.add(k);
    }
    return [...out];
  }

  private async derive(id: string): Promise<string[] | undefined> {
    const r = await this.records.getRecord(id).catch(() => undefined);
    if (!r) return undefined;
    const meta = r.meta as NamedMeta;
    switch (r.labels.kind) {
      case 'template': {
        const ids = [r.labels.templateId, ...(meta.template?.names ?? [])].filter((n): n is string => !!n);
        return ids.map(captureKey.template);
      }
      case 'snapshot':
        return [id, ...(meta.info?.names ?? [])].map(captureKey.snapshot);
      case 'pause':
        return [captureKey.pause(id)];
      default:
        return [];
    }
  }
}

/** What the cache keys need of the runtime cache and the repository's records. */
export interface CacheSource {
  stats(): { entries: readonly { id: string }[] };
}
export interface RecordSource {
  getRecord(
    id: string,
  ): Promise<{ labels: Readonly<Record<string, string>>; meta: Readonly<Record<string, unknown>> }>;
}

/**
 * The keys a node advertises for the captures in its runtime cache: each repository record id
 * (snapshot, pause, template build), and for a built template also `template/<id>` and
 * `template/<name>` for each of its names, which is what a create names. Records never change,
 * so each is read once.
 */
export class CacheKeys {
  private readonly known = new Map<string, string[]>();

  constructor(
    private readonly cache: CacheSource,
    private readonly records: RecordSource,
  ) {}

  async current(): Promise<string[]> {
    const ids = this.cache.stats().entries.map((e) => e.id);
    for (const k of this.known.keys()) if (!ids.includes(k)) this.known.delete(k);
    const out = new Set<string>();
    for (const id of ids) {
      let keys = this.known.get(id);
      if (!keys) {
        const derived = await this.derive(id);
        // An unreadable record is looked at again next time.
        if (derived) this.known.set(id, derived);
        keys = derived ?? [id];
      }
      for (const k of keys) out.add(k);
    }
    return [...out];
  }

  private async derive(id: string): Promise<string[] | undefined> {
    const r = await this.records.getRecord(id).catch(() => undefined);
    if (!r) return undefined;
    if (r.labels.kind !== 'template') return [id];
    const names = (r.meta as { template?: { names?: string[] } }).template?.names ?? [];
    const templateId = r.labels.templateId;
    return [id, ...(templateId ? [`template/${templateId}`] : []), ...names.map((n) => `template/${n}`)];
  }
}

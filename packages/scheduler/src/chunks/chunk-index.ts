/**
 * Which nodes hold which chunks, for peer-to-peer fetches: fed with each node's whole advertised
 * list, bounded in keys with the least recently advertised dropped first. Pure and in memory;
 * every replica rebuilds it from the nodes' stored lists when their digest changes.
 */
export class ChunkIndex {
  /** key → nodes; the map's order is least recently advertised first. */
  private readonly holders = new Map<string, Set<string>>();
  private readonly byNode = new Map<string, { digest: string; keys: Set<string> }>();

  constructor(private readonly maxKeys = 200_000) {}

  digest(nodeId: string): string | undefined {
    return this.byNode.get(nodeId)?.digest;
  }

  /** Replaces what the node holds. */
  replace(nodeId: string, digest: string, keys: readonly string[]): void {
    const next = new Set(keys);
    const prev = this.byNode.get(nodeId)?.keys ?? new Set<string>();
    for (const k of prev) if (!next.has(k)) this.unlink(k, nodeId);
    for (const k of next) {
      const set = this.holders.get(k) ?? new Set<string>();
      set.add(nodeId);
      this.holders.delete(k);
      this.holders.set(k, set);
    }
    this.byNode.set(nodeId, { digest, keys: next });
    while (this.holders.size > this.maxKeys) {
      const oldest = this.holders.keys().next().value!;
      for (const n of this.holders.get(oldest)!) this.byNode.get(n)?.keys.delete(oldest);
      this.holders.delete(oldest);
    }
  }

  forget(nodeId: string): void {
    for (const k of this.byNode.get(nodeId)?.keys ?? []) this.unlink(k, nodeId);
    this.byNode.delete(nodeId);
  }

  peers(key: string): string[] {
    return [...(this.holders.get(key) ?? [])];
  }

  get size(): number {
    return this.holders.size;
  }

  private unlink(key: string, nodeId: string): void {
    const set = this.holders.get(key);
    if (!set) return;
    set.delete(nodeId);
    if (set.size === 0) this.holders.delete(key);
  }
}

/**
 * A bounded sample of chunk hashes that two nodes pick alike: from each group (a capture's
 * chunks, ascending), its smallest hashes, the groups taken in turn so that every capture is
 * represented, each hash once. Hashes are uniform, so the smallest k of a capture are a fair
 * sample of it, and a node needing a capture that shares chunks with another one finds the
 * shared chunks among both samples (a bottom-k sketch).
 */
export function chunkSample(sortedGroups: readonly (readonly string[])[], limit: number): string[] {
  const out = new Set<string>();
  const longest = Math.max(0, ...sortedGroups.map((g) => g.length));
  for (let i = 0; i < longest && out.size < limit; i++) {
    for (const g of sortedGroups) {
      const h = g[i];
      if (h === undefined) continue;
      out.add(h);
      if (out.size >= limit) break;
    }
  }
  return [...out];
}

/** The distinct hashes ascending, for `chunkSample`. */
export function sortedDistinct(hashes: Iterable<string>): string[] {
  return [...new Set(hashes)].sort();
}

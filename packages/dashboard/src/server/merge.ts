import { comparator } from '@agentenv/common';
import type { Catalog, DashboardSandbox, SandboxPage, Summary } from '../shared/types.js';

/** One summary for the cluster: counts added up, every node's recent operations together. */
export function mergeSummaries(parts: readonly Summary[], now: number): Summary {
  const counts: Record<string, number> = {};
  for (const p of parts) for (const [s, n] of Object.entries(p.counts)) counts[s] = (counts[s] ?? 0) + n;
  return {
    nodeIDs: parts.flatMap((p) => p.nodeIDs),
    now,
    windowMs: Math.max(0, ...parts.map((p) => p.windowMs)),
    counts,
    samples: parts.flatMap((p) => p.samples).sort((a, b) => a.at - b.at),
  };
}

/** Newest first, as the gateway merges listings; ties by id so pages do not shuffle. */
const newestFirst = comparator<DashboardSandbox>('startedAt', 'desc');

/**
 * Page `offset..offset+limit` of the cluster's sandboxes from each node's first `offset+limit`
 * rows (a node's page `k` can only fall within the merged first `offset+limit`).
 */
export function mergePages(parts: readonly SandboxPage[], offset: number, limit: number): SandboxPage {
  const all = parts.flatMap((p) => p.items).sort(newestFirst);
  return {
    items: all.slice(offset, offset + limit),
    total: parts.reduce((n, p) => n + p.total, 0),
    offset,
    limit,
  };
}

/** The nodes share one snapshot repository: its entries once each; every node's cache. */
export function mergeCatalogs(parts: readonly Catalog[]): Catalog {
  const entries = new Map<string, Catalog['entries'][number]>();
  for (const p of parts) for (const e of p.entries) entries.set(e.id, e);
  return { entries: [...entries.values()], caches: parts.flatMap((p) => p.caches) };
}

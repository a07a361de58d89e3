import type { Candidate, PlacementRequest } from './candidate.js';
import { rejection } from './filters.js';
import type { PlacementPolicy } from './policy.js';
import { holdsCapture, score } from './score.js';

export type PlacementResult =
  | { ok: true; nodeId: string; localityHit: boolean }
  | { ok: false; kind: 'capacity' | 'unavailable'; message: string };

/** Reasons named in a refusal; a big cluster's full list would only bury the first ones. */
const MAX_REASONS = 5;

/**
 * Chooses a node: the filters first (ready, not excluded, room for the request), then the
 * preferred node if it passed, else the lowest score among best-of-K sampled nodes. Nodes holding
 * a requested capture are always in the sample, so locality is never lost to sampling.
 * No ready node → `unavailable`; ready nodes but none with room → `capacity`.
 */
export function place(
  candidates: readonly Candidate[],
  req: PlacementRequest,
  policy: PlacementPolicy,
  random: () => number = Math.random,
): PlacementResult {
  const ready = candidates.filter((c) => c.status === 'ready');
  if (ready.length === 0) return { ok: false, kind: 'unavailable', message: noReadyNode(candidates) };
  const excluded = new Set(req.excludeNodeIds);
  const reasons: string[] = [];
  const fits: Candidate[] = [];
  for (const c of ready) {
    const why = excluded.has(c.node.nodeId) ? 'excluded' : rejection(c, req, policy);
    if (why) reasons.push(`${c.node.nodeId}: ${why}`);
    else fits.push(c);
  }
  if (fits.length === 0) {
    const more = reasons.length > MAX_REASONS ? `; and ${reasons.length - MAX_REASONS} more` : '';
    return {
      ok: false,
      kind: 'capacity',
      message: `no node has room for ${describe(req)} (${reasons.slice(0, MAX_REASONS).join('; ')}${more})`,
    };
  }
  const preferred = req.preferNodeId ? fits.find((c) => c.node.nodeId === req.preferNodeId) : undefined;
  const best = preferred ?? lowest(sample(fits, req, policy.bestOfK, random), req, policy);
  return { ok: true, nodeId: best.node.nodeId, localityHit: holdsCapture(best, req) };
}

/** The nodes holding a requested capture, plus up to K others picked at random. */
export function sample(
  fits: readonly Candidate[],
  req: PlacementRequest,
  k: number,
  random: () => number,
): Candidate[] {
  const local = fits.filter((c) => holdsCapture(c, req));
  const rest = fits.filter((c) => !holdsCapture(c, req));
  // Partial Fisher–Yates: the first k of `rest` become a uniform random sample.
  const take = Math.min(Math.max(1, k), rest.length);
  for (let i = 0; i < take; i++) {
    const j = i + Math.floor(random() * (rest.length - i));
    [rest[i], rest[j]] = [rest[j]!, rest[i]!];
  }
  return [...local, ...rest.slice(0, take)];
}

function lowest(sampled: readonly Candidate[], req: PlacementRequest, policy: PlacementPolicy): Candidate {
  let best = sampled[0]!;
  let bestScore = score(best, req, policy);
  for (const c of sampled.slice(1)) {
    const s = score(c, req, policy);
    if (s < bestScore) [best, bestScore] = [c, s];
  }
  return best;
}

function describe(req: PlacementRequest): string {
  const { cpuCount, memoryMib } = req.resources;
  return `${req.count} sandbox${req.count === 1 ? '' : 'es'} of ${cpuCount} vCPU, ${memoryMib} MiB`;
}

function noReadyNode(candidates: readonly Candidate[]): string {
  if (candidates.length === 0) return 'no node has registered with the scheduler';
  const by = new Map<string, number>();
  for (const c of candidates) by.set(c.status, (by.get(c.status) ?? 0) + 1);
  return `no healthy node (${[...by].map(([s, n]) => `${n} ${s}`).join(', ')})`;
}

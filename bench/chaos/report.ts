/** A chaos run's counts as the docs quote them. */
import type { ChaosResult } from './run.js';

const table = (m: Map<string, number> | Record<string, number>) =>
  Object.entries(m instanceof Map ? Object.fromEntries(m) : m)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `  ${k.padEnd(28)} ${v}`)
    .join('\n');

export function report(r: ChaosResult, minutes: number): string {
  const faults = new Map<string, number>();
  for (const f of r.faults) faults.set(f.kind, (faults.get(f.kind) ?? 0) + 1);
  const v = r.verdict;
  return [
    `chaos run: ${minutes.toFixed(1)} min, ${r.rollouts} rollouts, ${r.faults.length} faults`,
    `operations:\n${table(r.books.ops)}`,
    `faults injected:\n${table(faults)}`,
    `client-visible errors (op:class):\n${table(r.books.errors) || '  none'}`,
    `sandboxes told: ${JSON.stringify(v.counts)}; lost with an infrastructure reason: ${v.lost}; untracked: ${r.untracked}`,
    `snapshots: ${r.books.snapshots.size}`,
    `unexpected client errors: ${r.books.unexpected.length}`,
    ...r.books.unexpected.map((l) => `  ${l}`),
    `invariant violations: ${v.violations.length}`,
    ...v.violations.map((x) => `  ${x.rule} ${x.id}: ${x.detail}`),
    `left behind after the stop: ${r.leftovers.length}`,
    ...r.leftovers.map((l) => `  ${l}`),
  ].join('\n');
}

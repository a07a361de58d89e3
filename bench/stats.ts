/** Small helpers shared by the benchmarks: timing, percentiles, table output. */
export function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export async function timeMs(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

export async function sample(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await timeMs(fn));
  return out;
}

export const fmt = (ms: number) => `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;

export function row(name: string, ours: number[], base: number[]): Record<string, string> {
  const [p50, p99, b50, b99] = [
    percentile(ours, 50),
    percentile(ours, 99),
    percentile(base, 50),
    percentile(base, 99),
  ];
  return {
    case: name,
    p50: fmt(p50),
    p99: fmt(p99),
    'baseline p50': fmt(b50),
    'baseline p99': fmt(b99),
    'ratio p50': (p50 / b50).toFixed(2) + 'x',
  };
}

/** One result line: p50 and p95, and when given, the baseline's p50 and the ratio of the p50s. */
export const line = (name: string, xs: number[], base?: number[]) =>
  console.log(
    `${name.padEnd(44)} p50 ${fmt(percentile(xs, 50)).padStart(9)}  p95 ${fmt(percentile(xs, 95)).padStart(9)}` +
      (base
        ? `   baseline p50 ${fmt(percentile(base, 50)).padStart(9)}  ratio ${(percentile(xs, 50) / percentile(base, 50)).toFixed(2)}x`
        : ''),
  );

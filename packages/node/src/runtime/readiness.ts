import { requestOnce } from '../util/index.js';

/** One GET /health on a fresh connection, reset afterwards (see FreshConnectionAgent). */
export function probeHealth(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return requestOnce({ host, port, method: 'GET', path: '/health', timeoutMs }).then(
    (r) => r.status >= 200 && r.status < 300,
    () => false,
  );
}

export interface WaitOptions {
  readonly timeoutMs: number;
  /** Checked between attempts; a dead sandbox fails the wait at once. Returns a reason when dead. */
  readonly dead?: () => Promise<string | null>;
  readonly intervalMs?: number;
}

/** Polls until envd answers; returns null when ready, otherwise why not. */
export async function waitForHealth(host: string, port: number, opts: WaitOptions): Promise<string | null> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.intervalMs ?? 15;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return `envd did not answer GET /health on ${host}:${port} within ${opts.timeoutMs} ms`;
    if (await probeHealth(host, port, Math.min(left, 1000))) return null;
    const dead = await opts.dead?.();
    if (dead) return dead;
    await new Promise((r) => setTimeout(r, interval));
  }
}

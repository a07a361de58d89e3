import { connect } from 'node:net';

/**
 * One GET /health over a fresh connection that the client resets afterwards. Pooled keep-alive
 * connections (fetch) or a server-side close would leave an established or TIME_WAIT endpoint in
 * the sandbox, and gVisor refuses to checkpoint those.
 */
export function probeHealth(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let buf = '';
    let done = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (!socket.destroyed) socket.resetAndDestroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.setNoDelay(true);
    socket.on('connect', () => socket.write(`GET /health HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`));
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      buf += d;
      const eol = buf.indexOf('\r\n');
      if (eol >= 0) finish(/^HTTP\/1\.[01] 2\d\d/.test(buf.slice(0, eol)));
    });
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
  });
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

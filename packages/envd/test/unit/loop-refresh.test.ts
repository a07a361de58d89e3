/**
 * native/loop-refresh.c: a dead epoll interest (what a restored gVisor checkpoint can carry, see
 * src/loop-refresh.ts) cuts new connections on its fd number, and rebuilding the loop's epoll
 * instance fixes them. Reproduced on the host's Linux with the same libuv (fixtures/stale-epoll.mjs).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildAddon } from '../../scripts/build-tools-bundle.js';
import { refreshReason, SPIN_UTILIZATION } from '../../src/loop-refresh.js';

const run = promisify(execFile);
const FIXTURE = fileURLToPath(new URL('./fixtures/stale-epoll.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'aenv-loop-refresh-'));
const addon = process.platform === 'linux' ? buildAddon(dir, 'loop-refresh') : undefined;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Outcome {
  fd: number;
  /** The dead interest was in the loop's epoll instance before the requests. */
  stale: boolean;
  /** The loop's utilization while idle, before the dead interest, and with it in place. */
  idleBusy: number;
  staleBusy: number;
  refreshed: number | null;
  results: string[];
}

async function scenario(withAddon: boolean): Promise<Outcome> {
  const { stdout } = await run(process.execPath, [FIXTURE, ...(withAddon ? [addon!] : [])], {
    timeout: 20_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as Outcome;
}

describe.skipIf(!addon)('loop refresh', () => {
  it('a dead epoll interest cuts requests on its fd number', async () => {
    const o = await scenario(false);
    expect(o.stale).toBe(true);
    expect(o.results.every((r) => r.startsWith('error'))).toBe(true);
  });

  it('a dead epoll interest makes the loop spin, which the guard takes for one', async () => {
    const o = await scenario(false);
    expect(o.stale).toBe(true);
    expect(o.idleBusy).toBeLessThan(SPIN_UTILIZATION);
    expect(o.staleBusy).toBeGreaterThanOrEqual(SPIN_UTILIZATION);
    expect(refreshReason(250, 250, 1000, o.idleBusy)).toBeUndefined();
    expect(refreshReason(250, 250, 1000, o.staleBusy)).toMatch(/spinning/);
  });

  it('rebuilding the epoll instance drops it', async () => {
    const o = await scenario(true);
    expect(o.stale).toBe(true);
    expect(o.refreshed).toBe(0);
    expect(o.results).toEqual(['200 answered', '200 answered', '200 answered']);
  });
});

describe('when the guard rebuilds the loop', () => {
  it('after a clock jump past its period, or a period spent spinning', () => {
    expect(refreshReason(260, 250, 1000, 0.01)).toBeUndefined();
    expect(refreshReason(1251, 250, 1000, 0.01)).toBe('clock jumped 1251 ms');
    expect(refreshReason(300, 250, 1000, 0.5)).toBeUndefined();
    expect(refreshReason(300, 250, 1000, 0.99)).toBe('event loop spinning (99 % busy)');
  });
});

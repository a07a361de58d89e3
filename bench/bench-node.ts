import { existsSync } from 'node:fs';
import { mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { BASE_RECIPE, recipeHash } from '@agentenv/node';
import { TEST_HOME } from '@agentenv/test-support/runtime';
import { cleanSandboxes, type TestServer } from '@agentenv/test-support/server';

/**
 * Where a benchmark's own aenv-server lives: a port (181xx: test nodes use 180xx), home, runtime
 * dir, network tag and address range that no test node and no other benchmark uses, with the warm pool off so every create
 * measures the path under test.
 */
export interface BenchNode {
  readonly url: string;
  readonly home: string;
  readonly runtime: string;
  readonly tag: string;
  /** Environment for startServer (@agentenv/test-support/server). */
  readonly env: Record<string, string>;
}

export function benchNode(o: { port: number; name: string; tag: string; hostRange: string }): BenchNode {
  const home = `/var/lib/aenv-bench-${o.name}`;
  const runtime = `/run/aenv-bench-${o.name}`;
  return {
    url: `http://127.0.0.1:${o.port}`,
    home,
    runtime,
    tag: o.tag,
    env: {
      API_ADDR: `127.0.0.1:${o.port}`,
      AENV_HOME_PATH: home,
      AENV_RUNTIME_PATH: runtime,
      AENV_NETWORK_NODE_TAG: o.tag,
      AENV_NETWORK_HOST_RANGE: o.hostRange,
      AENV_POOL_SIZE: '0',
    },
  };
}

/**
 * Links the base template's root filesystem layer from the tests' cache into `home`, when it is
 * there, so a node or driver started on `home` captures the base ready state in seconds instead
 * of building the rootfs (about a minute of mmdebstrap that would run beside the measurements).
 */
export async function borrowBaseRootfs(home: string): Promise<void> {
  const rootfsId = recipeHash(BASE_RECIPE);
  await mkdir(join(home, 'layers'), { recursive: true });
  const cached = join(TEST_HOME, 'layers', rootfsId);
  if (existsSync(cached)) await symlink(cached, join(home, 'layers', rootfsId));
}

/**
 * Waits (up to 15 s) until the node at `url` has `size` warm sandboxes ready (its pool of network
 * slots not counted), so that a timed create is served by the pool.
 */
export async function poolFull(url: string, size: number): Promise<void> {
  for (let t = 0; t < 300; t++) {
    const text = await fetch(`${url}/metrics`).then((r) => r.text());
    const ready = [...text.matchAll(/^aenv_pool_ready\{pool="([^"]+)"\} (\d+)$/gm)].filter(
      (m) => m[1] !== 'network',
    );
    if (ready.some((m) => Number(m[2]) >= size)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A node's /metrics read at `at` (ms): each sample's name with its labels → value. */
export interface Scrape {
  at: number;
  values: Map<string, number>;
}

export async function scrape(url: string): Promise<Scrape> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text());
  const values = new Map<string, number>();
  for (const m of text.matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$/gm))
    values.set(m[1]!, Number(m[2]));
  return { at: Date.now(), values };
}

/** How much a counter (or a histogram's sum or count) grew from `before` to `after`. */
export const delta = (after: Scrape, before: Scrape, name: string): number =>
  (after.values.get(name) ?? 0) - (before.values.get(name) ?? 0);

/**
 * Stops a benchmark's node after killing its sandboxes (else its SIGTERM pauses them to disk
 * first); throws when the stop fails.
 */
export async function stopBenchServer(server: TestServer): Promise<void> {
  await cleanSandboxes().catch(() => undefined);
  await server.stop();
}

/**
 * Runs a benchmark's body, then `cleanup` whatever happened. On a failure it prints the error,
 * what `explain` adds, and the end of the node's output (`server()` is read then: the body starts
 * the node), and sets exit code 1.
 */
export async function runBench(
  body: () => Promise<void>,
  opts: { server: () => TestServer | undefined; cleanup: () => Promise<void>; explain?: () => void },
): Promise<void> {
  try {
    await body();
  } catch (e) {
    console.error(e);
    opts.explain?.();
    const server = opts.server();
    if (server) console.error(`node output:\n${server.output().slice(-4000)}`);
    process.exitCode = 1;
  } finally {
    await opts.cleanup();
  }
}

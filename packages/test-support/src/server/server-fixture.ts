import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { relative } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { callApi } from '../api-call.js';
import { packageDir } from '../paths.js';

const SERVER = `${packageDir('@agentenv/node')}/bin/aenv-server.js`;

/**
 * A persistent home so the base template (a Debian root filesystem and its ready-state capture)
 * is built once per machine, not per test run; sandbox state in it is removed by the tests.
 */
const SHARED_HOME = process.env.AENV_TEST_HOME ?? '/var/lib/aenv-test';
/**
 * AENV_TEST_INSTANCE=N (0-29) runs a test node beside the others: its own port, network tag and
 * range, and state, sharing the cached layers and templates. scripts/test.sh gives each of its
 * lanes a multiple of 10; a file that needs more nodes takes them from the nine above its own.
 */
export const INSTANCE = Number(process.env.AENV_TEST_INSTANCE ?? 0);
/** The `k`th (1-9) extra node of this file, an instance no file of another lane uses. */
export const nearInstance = (k: number) => INSTANCE + k;
export const TEST_HOME = INSTANCE ? `${SHARED_HOME}/instances/${INSTANCE}` : SHARED_HOME;

/** A sandbox's local captures on the test node's disk (directory names). */
export function localCaptures(sandboxId: string): string[] {
  const d = `${TEST_HOME}/captures/${sandboxId}`;
  return existsSync(d) ? readdirSync(d) : [];
}
/** The snapshot repository of this file's node (posix_fs), which a second node may share. */
export const SNAPSHOT_STORE = `${TEST_HOME}/snapshot-store`;
export const API_KEY = 'e2b_' + '0123456789abcdef'.repeat(2);
export const PORT = 18000 + INSTANCE;
export const URL_BASE = `http://127.0.0.1:${PORT}`;
export const DOMAIN = 'aenv.test';
const tagOf = (instance: number) => `e2e${instance || ''}`;
/** This file's node's network tag: its namespaces are `aenv-<tag>-…`, its chains `AENV-<tag>-…`. */
export const NODE_TAG = tagOf(INSTANCE);
export const RUNTIME_PATH = `/run/aenv-${NODE_TAG}`;

/** A test node's home: the shared one for instance 0, its own under instances/ otherwise. */
export const homeOf = (instance: number) => (instance ? `${SHARED_HOME}/instances/${instance}` : SHARED_HOME);
/**
 * Where a node's output is kept: one file per test file and instance, so the output behind a
 * failure in a full run is still there when the run ends.
 */
function serverLogPath(instance: number): string {
  const testFile = currentTestFile();
  const name = testFile ? relative(process.cwd(), testFile).replace(/[/\\]/g, '_') : 'server';
  return `${SHARED_HOME}/logs/${name}.${instance}.log`;
}

function currentTestFile(): string | undefined {
  try {
    return expect.getState().testPath;
  } catch {
    // A benchmark run with tsx, outside vitest, has no test state.
    return undefined;
  }
}

export const urlOf = (instance: number) => `http://127.0.0.1:${18000 + instance}`;
/** One /16 per instance, clear of the ranges the cluster suite, benches and defaults use. */
const hostRangeOf = (instance: number) => `10.${20 + instance}.0.0/16`;

function prepareHome(instance: number): void {
  if (!instance) return;
  const home = homeOf(instance);
  mkdirSync(home, { recursive: true });
  for (const shared of ['layers', 'templates']) {
    mkdirSync(`${SHARED_HOME}/${shared}`, { recursive: true });
    if (!existsSync(`${home}/${shared}`)) symlinkSync(`${SHARED_HOME}/${shared}`, `${home}/${shared}`);
  }
}

export interface TestServer {
  child: ChildProcess;
  output(): string;
  /** SIGTERM (pauses running sandboxes) or SIGKILL (a crash). */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

/**
 * Starts aenv-server on 127.0.0.1:18000 (+ instance) with its own network tag and range, and
 * waits for /health. Another instance number gives a second node beside this file's. With
 * API_ADDR and AENV_HOME_PATH in `env` the node shares nothing with the test instances (a bench).
 */
export async function startServer(
  env: Record<string, string> = {},
  instance = INSTANCE,
): Promise<TestServer> {
  const url = env.API_ADDR ? `http://${env.API_ADDR}` : urlOf(instance);
  const server = spawnServer(env, instance);
  const { child } = server;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`aenv-server exited with ${child.exitCode}:\n${server.output()}`);
    const ok = await fetch(`${url}/health`).then(
      (r) => r.status === 204,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      // Left running, it would take the port, and its tag's namespaces and sandboxes, from every later file.
      await server.stop('SIGKILL');
      throw new Error(`aenv-server did not answer /health in 60 s:\n${server.output()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return server;
}

/** Starts aenv-server like startServer, without waiting for it to answer. */
export function spawnServer(env: Record<string, string> = {}, instance = INSTANCE): TestServer {
  if (!env.AENV_HOME_PATH) prepareHome(instance);
  let out = '';
  const child = spawn(process.execPath, [SERVER], {
    env: {
      ...process.env,
      API_ADDR: `127.0.0.1:${18000 + instance}`,
      AENV_HOME_PATH: homeOf(instance),
      AENV_RUNTIME_PATH: `/run/aenv-${tagOf(instance)}`,
      AENV_API_KEY: API_KEY,
      AENV_NETWORK_NODE_TAG: tagOf(instance),
      AENV_NETWORK_HOST_RANGE: hostRangeOf(instance),
      AENV_SANDBOX_PROXY_DOMAINS: DOMAIN,
      AENV_POOL_SIZE: '2',
      AENV_LOG_LEVEL: process.env.AENV_TEST_LOG_LEVEL ?? 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Also kept in a file beside the shared template cache, to read what the node said when a test
  // failed.
  mkdirSync(`${SHARED_HOME}/logs`, { recursive: true });
  const log = createWriteStream(serverLogPath(instance), { flags: 'a' });
  log.write(`--- aenv-server started ${new Date().toISOString()}\n`);
  const keep = (d: Buffer) => {
    out += d.toString();
    log.write(d);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.once('exit', () => log.end());
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      await exited;
    },
  };
}

let apiBase = URL_BASE;

/** Points the E2B SDK (and api()) at the test server, as a user following the README would. */
export function useSdkEnv(url = URL_BASE): void {
  apiBase = url;
  process.env.E2B_API_URL = url;
  process.env.E2B_SANDBOX_URL = url;
  process.env.E2B_VOLUME_API_URL = url;
  process.env.E2B_API_KEY = API_KEY;
  delete process.env.E2B_DEBUG;
}

/** The API of the node at `base` (another instance's `urlOf(n)`), called like api(). */
export function apiAt(base: string) {
  return (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    callApi(base, API_KEY, method, path, body, headers);
}

/** The test node's API (the one useSdkEnv points at): status, headers and the parsed body. */
export const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  apiAt(apiBase)(method, path, body, headers);

/** Kills every sandbox the server knows and removes its record database. */
export async function cleanSandboxes(): Promise<void> {
  const list = await api('GET', '/v2/sandboxes?limit=100');
  if (Array.isArray(list.json)) {
    await Promise.all(
      list.json.map((s) => api('DELETE', `/sandboxes/${(s as { sandboxID: string }).sandboxID}`)),
    );
  }
}

export function removeState(): void {
  for (const d of ['state', 'captures', 'snapshot-store', 'snapshot-cache'])
    rmSync(`${TEST_HOME}/${d}`, { recursive: true, force: true });
}

/**
 * One server for the test file: started before its tests with fresh state, with the E2B SDK
 * pointed at it, and stopped afterwards leaving no sandboxes, snapshots or state behind.
 * `ctx.server` may be replaced by tests that restart the node; `startServer(ctx.env)` starts it
 * as it was.
 */
export function useTestServer(env: Record<string, string> = {}): {
  server: TestServer;
  readonly env: Record<string, string>;
} {
  // One warm sandbox: creates still take the pool's path, and each test file's node restores
  // (and keeps idle) one sandbox fewer than a node started by a bench.
  const nodeEnv: Record<string, string> = { AENV_POOL_SIZE: '1', ...env };
  const ctx = { env: nodeEnv } as { server: TestServer; readonly env: Record<string, string> };
  beforeAll(async () => {
    removeState();
    rmSync(serverLogPath(INSTANCE), { force: true });
    ctx.server = await startServer(ctx.env);
    useSdkEnv();
  });
  afterAll(async () => {
    await cleanSandboxes().catch(() => undefined);
    await ctx.server?.stop();
    removeState();
  });
  return ctx;
}

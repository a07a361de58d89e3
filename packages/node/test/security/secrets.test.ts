import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { descendants, environOf, eventually, faultOnSigusr2 } from '@agentenv/test-support';
import {
  API_KEY,
  api,
  cleanSandboxes,
  NODE_TAG as TAG,
  removeState,
  startServer,
  type TestServer,
} from '@agentenv/test-support/server';

const ownNamespaces = () =>
  execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.startsWith(`aenv-${TAG}-`));

async function exitCode(server: TestServer): Promise<number | null> {
  if (server.child.exitCode !== null) return server.child.exitCode;
  const [code] = (await once(server.child, 'exit')) as [number | null];
  return code;
}

describe.skipIf(process.getuid?.() !== 0)('the node keeps its API key secret and fails safely', () => {
  let dir = '';
  let server: TestServer | undefined;

  beforeAll(() => {
    removeState();
    dir = mkdtempSync(path.join(tmpdir(), 'aenv-sec-'));
  });
  afterEach(async () => {
    if (server && server.child.exitCode === null) {
      await cleanSandboxes().catch(() => undefined);
      await server.stop();
    }
    server = undefined;
    removeState();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a key from AENV_API_KEY: in no output and no program it runs; a rejection is logged redacted', async () => {
    server = await startServer({ AENV_LOG_LEVEL: 'debug', ...faultOnSigusr2('reject', API_KEY) });
    const out = server.output;
    await eventually(() => expect(out()).toContain('E2B_API_KEY=$AENV_API_KEY'));
    expect(out()).toContain('API key: not printed, it is AENV_API_KEY');
    const created = await api('POST', '/sandboxes', { templateID: 'base' });
    expect(created.status).toBe(201);

    // The spawner, what it runs (runsc and its sandbox processes, …): none holds the key.
    const pids = descendants(server.child.pid!);
    const environs = pids.map((pid) => ({ pid, env: environOf(pid) }));
    expect(environs.filter((e) => e.env.length > 0).length).toBeGreaterThan(1);
    for (const { pid, env } of environs) {
      expect(
        env.filter((e) => e.startsWith('AENV_API_KEY=') || e.includes(API_KEY)),
        String(pid),
      ).toEqual([]);
    }

    server.child.kill('SIGUSR2');
    await eventually(() => expect(out()).toContain('unhandled rejection; serving on'));
    expect((await api('GET', '/v2/sandboxes')).status).toBe(200);
    expect(out()).toContain('"apiKey":"[Redacted]"');
    expect(out()).not.toContain(API_KEY);
  });

  it('a key from AENV_API_KEY_FILE: the banner says where; an uncaught exception stops it cleanly, non-zero', async () => {
    const keyFile = path.join(dir, 'api-key');
    writeFileSync(keyFile, `${API_KEY}\n`, { mode: 0o600 });
    server = await startServer({
      AENV_API_KEY: '',
      AENV_API_KEY_FILE: keyFile,
      AENV_LOG_LEVEL: 'info',
      ...faultOnSigusr2('throw', API_KEY),
    });
    const out = server.output;
    await eventually(() => expect(out()).toContain(`E2B_API_KEY=$(cat ${keyFile})`));
    expect(out()).toContain(`API key: not printed, it is in ${keyFile}`);
    expect((await api('POST', '/sandboxes', { templateID: 'base' })).status).toBe(201);

    server.child.kill('SIGUSR2');
    expect(await exitCode(server)).toBe(1);
    expect(out()).toContain('uncaught exception; stopping');
    expect(out()).toContain('shutting down: pausing running sandboxes');
    expect(ownNamespaces()).toEqual([]);
    expect(out()).not.toContain(API_KEY);
  });
});

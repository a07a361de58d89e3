import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, API_KEY, URL_BASE, useTestServer } from '@agentenv/test-support/server';

/** E2B's own CLI (`@e2b/cli`, pinned), as a user runs it against a node. */
const CLI = path.join(
  path.dirname(createRequire(import.meta.url).resolve('@e2b/cli/package.json')),
  'dist/index.js',
);
const MIB = 1024 * 1024;
// Its own home: no ~/.e2b/config.json of whoever runs the tests. Without a terminal it skips the
// update check (the one call it would make elsewhere).
const home = mkdtempSync(path.join(tmpdir(), 'aenv-e2b-cli-'));

function e2b(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        PATH: process.env.PATH,
        HOME: home,
        E2B_API_URL: URL_BASE,
        E2B_SANDBOX_URL: URL_BASE,
        E2B_API_KEY: API_KEY,
        FORCE_COLOR: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs the CLI and expects it to succeed. */
async function ok(...args: string[]): Promise<string> {
  const r = await e2b(...args);
  expect(r.code, `e2b ${args.join(' ')}\n${r.stdout}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

const jsonOut = async (...args: string[]) => JSON.parse(await ok(...args)) as unknown;

useTestServer();
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('the e2b CLI against a node', () => {
  it('lists the base template', async () => {
    const templates = (await jsonOut('template', 'list', '-f', 'json')) as {
      templateID: string;
      aliases: string[];
    }[];
    const base = templates.find((t) => t.templateID === 'base');
    expect(base).toMatchObject({ aliases: ['base'], memoryMB: 1024, cpuCount: 2 });
    expect(await ok('template', 'list')).toMatch(/base/);
  });

  it('lists, inspects, runs in, reads the logs and metrics of, pauses, resumes and kills a sandbox', async () => {
    const sbx = await Sandbox.create({ metadata: { suite: 'e2b-cli' } });
    const id = sbx.sandboxId;
    try {
      const listed = (await jsonOut('sandbox', 'list', '-m', 'suite=e2b-cli', '-f', 'json')) as {
        sandboxId: string;
      }[];
      expect(listed.map((s) => s.sandboxId)).toEqual([id]);
      expect(await ok('sandbox', 'list')).toContain(id);

      const info = (await jsonOut('sandbox', 'info', id, '-f', 'json')) as Record<string, unknown>;
      const viaApi = (await api('GET', `/sandboxes/${id}`)).json as Record<string, unknown>;
      expect(info).toMatchObject({
        sandboxId: id,
        templateId: viaApi.templateID,
        state: 'running',
        memoryMB: viaApi.memoryMB,
        metadata: { suite: 'e2b-cli' },
      });

      expect(await ok('sandbox', 'exec', id, 'sh', '-c', 'echo "hi from $(whoami)"')).toBe('hi from user\n');
      const failing = await e2b('sandbox', 'exec', id, 'sh', '-c', 'exit 3');
      expect(failing.code).toBe(3);

      const logLines = (await ok('sandbox', 'logs', id, '--format', 'json'))
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: string; message: string; timestamp: string });
      expect(
        logLines.some(
          (l) => /^sandbox created from/.test(l.message) && l.level.trim().toLowerCase() === 'info',
        ),
        JSON.stringify(logLines),
      ).toBe(true);
      expect(await ok('sandbox', 'logs', id)).toMatch(/INFO[\s\S]*sandbox created from/);

      const memoryMB = viaApi.memoryMB as number;
      const diskSizeMB = viaApi.diskSizeMB as number;
      const metric = (await ok('sandbox', 'metrics', id, '--format', 'json'))
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { memTotal: number; diskTotal: number; memUsed: number })[0]!;
      expect(metric).toMatchObject({ memTotal: memoryMB * MIB, diskTotal: diskSizeMB * MIB });
      expect(metric.memUsed).toBeLessThan(memoryMB * MIB);
      const pretty = await ok('sandbox', 'metrics', id);
      expect(pretty).toMatch(new RegExp(`Memory: +\\d+ / ${memoryMB} +MiB`));
      expect(pretty).toMatch(new RegExp(`Disk: +\\d+ / ${diskSizeMB} +MiB`));

      expect(await ok('sandbox', 'pause', id)).toMatch(/has been paused/);
      expect((await api('GET', `/sandboxes/${id}`)).json.state).toBe('paused');
      expect(await ok('sandbox', 'resume', id)).toMatch(/has been resumed/);
      expect((await api('GET', `/sandboxes/${id}`)).json.state).toBe('running');
      expect((await sbx.commands.run('echo still here')).stdout).toBe('still here\n');
    } finally {
      expect(await ok('sandbox', 'kill', id)).toMatch(/has been killed/);
    }
    expect((await api('GET', `/sandboxes/${id}`)).status).toBe(404);
  });

  it('creates, lists and deletes snapshots', async () => {
    const sbx = await Sandbox.create();
    try {
      const created = await ok('sandbox', 'snapshot', 'create', sbx.sandboxId);
      const snapshotId = /Created snapshot (\S+) from sandbox/.exec(created)?.[1];
      expect(snapshotId).toBeTruthy();
      const listed = (await jsonOut('sandbox', 'snapshot', 'list', '-f', 'json')) as { snapshotId: string }[];
      expect(listed.map((s) => s.snapshotId)).toContain(snapshotId);
      const ofSandbox = (await jsonOut(
        'sandbox',
        'snapshot',
        'list',
        sbx.sandboxId,
        '-f',
        'json',
      )) as unknown[];
      expect(ofSandbox).toHaveLength(1);
      expect(await ok('sandbox', 'snapshot', 'delete', snapshotId!)).toMatch(/has been deleted/);
      const after = (await jsonOut('sandbox', 'snapshot', 'list', '-f', 'json')) as { snapshotId: string }[];
      expect(after.map((s) => s.snapshotId)).not.toContain(snapshotId);
    } finally {
      await sbx.kill();
    }
  });
});

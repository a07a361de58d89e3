import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually, pidAlive } from '@agentenv/test-support';
import { DEFAULT_REAPER_PATH, reaperAvailable, runDetached } from '../../src/runtime/gvisor/reaper.js';
import { launchProcessesWith, ProcessSpawner } from '../../src/util/index.js';

const built = await reaperAvailable(DEFAULT_REAPER_PATH);
if (!built)
  console.warn(
    `[reaper] SKIPPED: ${DEFAULT_REAPER_PATH} is not built (npm run build:native -w @agentenv/node)`,
  );

describe.skipIf(!built)('aenv-reaper', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aenv-reaper-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reports the command exit as soon as it exits, output in the log, while it waits for what it left', async () => {
    const log = join(dir, 'a.log');
    const pidFile = join(dir, 'orphan.pid');
    // The orphan outlives the command, like a detached sandbox outlives `runsc run --detach`.
    const r = await runDetached(['/bin/sh', '-c', `sleep 30 & echo $! > ${pidFile}; echo started; exit 3`], {
      logPath: log,
      timeoutMs: 10_000,
      reaperPath: DEFAULT_REAPER_PATH,
    });
    expect(r).toMatchObject({ code: 3, timedOut: false });
    expect(readFileSync(log, 'utf8')).toBe('started\n');
    const orphan = Number(readFileSync(pidFile, 'utf8'));
    const parent = () => /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${orphan}/status`, 'utf8'))?.[1];
    const reaper = Number(parent());
    expect(spawnSync('cat', [`/proc/${reaper}/cmdline`], { encoding: 'utf8' }).stdout).toContain(
      'aenv-reaper',
    );
    process.kill(orphan, 'SIGKILL');
    // Reaped at once by the reaper, which then has nothing left and exits.
    await eventually(() => expect(pidAlive(reaper)).toBe(false), { timeoutMs: 5_000, intervalMs: 10 });
    expect(() => readFileSync(`/proc/${orphan}/status`)).toThrow();
  });

  it('runs from the process spawner once installed, and outlives it while its orphan runs', async () => {
    const spawner = new ProcessSpawner();
    launchProcessesWith(spawner);
    try {
      const pidFile = join(dir, 'spawned-orphan.pid');
      const r = await runDetached(['/bin/sh', '-c', `sleep 30 & echo $! > ${pidFile}; exit 4`], {
        logPath: join(dir, 'd.log'),
        timeoutMs: 10_000,
        reaperPath: DEFAULT_REAPER_PATH,
      });
      expect(r).toMatchObject({ code: 4, timedOut: false });
      const orphan = Number(readFileSync(pidFile, 'utf8'));
      const reaper = Number(/^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${orphan}/status`, 'utf8'))?.[1]);
      const parentOfReaper = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${reaper}/status`, 'utf8'))?.[1];
      expect(Number(parentOfReaper)).toBe(spawner.pid);
      await spawner.close();
      expect(pidAlive(reaper)).toBe(true);
      process.kill(orphan, 'SIGKILL');
      await eventually(() => expect(pidAlive(reaper)).toBe(false), { timeoutMs: 5_000, intervalMs: 10 });
    } finally {
      launchProcessesWith(undefined);
      await spawner.close();
    }
  });

  it('kills the command on timeout and says so', async () => {
    const r = await runDetached(['/bin/sleep', '30'], {
      logPath: join(dir, 'b.log'),
      timeoutMs: 200,
      reaperPath: DEFAULT_REAPER_PATH,
    });
    expect(r.timedOut).toBe(true);
    expect(r.code).toBe(128 + 9);
  });

  it('fails clearly when the command cannot be started', async () => {
    const r = await runDetached(['/nonexistent/program'], {
      logPath: join(dir, 'c.log'),
      timeoutMs: 10_000,
      reaperPath: DEFAULT_REAPER_PATH,
    });
    expect(r.code).toBe(127);
    expect(readFileSync(join(dir, 'c.log'), 'utf8')).toMatch(/nonexistent/);
  });
});

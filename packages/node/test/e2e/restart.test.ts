import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createServer } from 'node:net';
import { Sandbox } from 'e2b';
import { describe, expect, it } from 'vitest';
import { eventually, stressRounds } from '@agentenv/test-support';
import {
  api,
  apiAt,
  homeOf,
  nearInstance,
  RUNTIME_PATH,
  startServer,
  urlOf,
  useTestServer,
} from '@agentenv/test-support/server';

const node = useTestServer();
/**
 * Snapshot commits killed at a random moment: each is a new random point, a few find what a
 * broken commit protocol does; AENV_TEST_STRESS=1 tries more.
 */
const SNAPSHOT_CRASHES = stressRounds(2, 8);
/** A delay that is the point of a test: a crash at that moment of the work in flight. */
const after = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The file's node started again as it was (a pool of one). */
const startAgain = () => startServer(node.env);

async function restart(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  await node.server.stop(signal);
  node.server = await startAgain();
}

/** Sandboxes of a node's runtime dir suspended ahead of a checkpoint they are owed. */
function owedCheckpoints(runtimePath: string): number {
  return readdirSync(runtimePath).flatMap((tag) => {
    const dir = path.join(runtimePath, tag, 'sandboxes');
    if (!existsSync(dir)) return [];
    return readdirSync(dir).filter((id) => existsSync(path.join(dir, id, 'suspended.json')));
  }).length;
}

/** runsc sandboxes of a node's runtime dir (the test node's by default) that are still alive. */
function runscLeft(runtimePath = RUNTIME_PATH): string[] {
  const out = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.startsWith('runsc') && l.includes(`${runtimePath}/`));
}

describe('node restarts', () => {
  it('keeps a paused sandbox with its memory and files, and pauses running ones on SIGTERM, across a restart', async () => {
    const [sbx, running] = await Promise.all([
      Sandbox.create(),
      Promise.all([1, 2].map(() => Sandbox.create())),
    ]);
    await sbx.files.write('/home/user/kept.txt', 'across restarts');
    await sbx.commands.run(
      "python3 -c \"import time\nn=0\nwhile True:\n  n+=1\n  open('/tmp/py','w').write(str(n))\n  time.sleep(0.1)\"",
      {
        background: true,
        timeoutMs: 0,
      },
    );
    const counted = async (s: Sandbox) =>
      Number((await s.commands.run('cat /tmp/py 2>/dev/null || echo 0')).stdout);
    await eventually(async () => expect(await counted(sbx)).toBeGreaterThan(1));
    await sbx.pause();
    await Promise.all(running.map((s, i) => s.files.write('/tmp/who', `sandbox ${i}`)));
    // One restart for both: the paused sandbox is kept, the running ones are paused by the stop.
    await restart('SIGTERM');
    const again = await Sandbox.connect(sbx.sandboxId);
    expect(await again.files.read('kept.txt')).toBe('across restarts');
    const a = Number(await again.files.read('/tmp/py'));
    // The process kept running across the pause and the restart.
    await eventually(async () => expect(await counted(again)).toBeGreaterThan(a));
    await again.kill();
    for (const [i, s] of running.entries()) {
      expect((await api('GET', `/sandboxes/${s.sandboxId}`)).json.state).toBe('paused');
      const resumed = await Sandbox.connect(s.sandboxId);
      expect(await resumed.files.read('/tmp/who')).toBe(`sandbox ${i}`);
      await resumed.kill();
    }
  });

  it('after a crash, reports running sandboxes lost and leaves nothing behind', async () => {
    const sbx = await Sandbox.create();
    await restart('SIGKILL');
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
    expect(runscLeft()).toEqual([]);
    const fresh = await Sandbox.create();
    expect((await fresh.commands.run('echo alive')).stdout).toBe('alive\n');
    await fresh.kill();
  });

  it('after a crash right after a pause answered (its checkpoint still running), it resumes with its memory', async () => {
    const sbx = await Sandbox.create();
    await sbx.files.write('/tmp/mark', 'suspended');
    await sbx.commands.run('sleep 3600', { background: true });
    const pid = (await sbx.commands.run('pgrep -x sleep')).stdout.trim();
    expect((await api('POST', `/sandboxes/${sbx.sandboxId}/pause`)).status).toBe(204);
    // The pause answered once the sandbox was suspended; its checkpoint, still owed, takes longer
    // than this look and the kill.
    expect(owedCheckpoints(RUNTIME_PATH)).toBe(1);
    await node.server.stop('SIGKILL');
    node.server = await startAgain();
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).json.state).toBe('paused');
    const again = await Sandbox.connect(sbx.sandboxId);
    expect(await again.files.read('/tmp/mark')).toBe('suspended');
    expect((await again.commands.run('pgrep -x sleep')).stdout.trim()).toBe(pid);
    await again.kill();
    expect(runscLeft()).toEqual([]);
  });

  it('after a crash during a pause, the sandbox is paused and resumable or lost, never half-alive', async () => {
    // Early in the checkpoint, late in it, and while the pause is stored into the repository.
    for (const delay of [50, 400, 1800]) {
      const sbx = await Sandbox.create();
      await sbx.files.write('/tmp/mark', 'm');
      const pausing = api('POST', `/sandboxes/${sbx.sandboxId}/pause`).catch(() => undefined);
      await after(delay);
      await node.server.stop('SIGKILL');
      await pausing;
      node.server = await startAgain();
      const r = await api('GET', `/sandboxes/${sbx.sandboxId}`);
      if (r.status === 404) continue;
      expect(r.json.state).toBe('paused');
      const again = await Sandbox.connect(sbx.sandboxId);
      expect(await again.files.read('/tmp/mark')).toBe('m');
      await again.kill();
    }
    expect(runscLeft()).toEqual([]);
  });

  it('after crashes at random points of snapshot commits, every listed snapshot restores', async () => {
    const taken: string[] = [];
    for (let i = 0; i < SNAPSHOT_CRASHES; i++) {
      const sbx = await Sandbox.create();
      await sbx.files.write('/tmp/mark', `snap ${i}`);
      const snapshotting = api('POST', `/sandboxes/${sbx.sandboxId}/snapshots`, { name: `crash-${i}` }).catch(
        () => undefined,
      );
      const delay = Math.round(Math.random() * 2500);
      await after(delay);
      await node.server.stop('SIGKILL');
      const r = await snapshotting;
      if (r?.status === 201) taken.push(r.json.snapshotID as string);
      node.server = await startAgain();
      const listed = (await api('GET', '/snapshots')).json as { snapshotID: string; names: string[] }[];
      // A snapshot acknowledged before the crash is never lost.
      for (const id of taken) expect(listed.map((l) => l.snapshotID)).toContain(id);
      for (const snap of listed) {
        const child = await Sandbox.create(snap.snapshotID);
        const n = /^crash-(\d+)$/.exec(snap.names[0] ?? '')?.[1];
        expect(await child.files.read('/tmp/mark'), `after a kill at ${delay} ms`).toBe(`snap ${n}`);
        await child.kill();
      }
    }
    for (const snap of (await api('GET', '/snapshots')).json as { snapshotID: string }[])
      await api('DELETE', `/templates/${snap.snapshotID}`);
    expect(runscLeft()).toEqual([]);
  });

  it('leaves no namespaces or sandboxes behind when it cannot start (port taken)', async () => {
    const other = nearInstance(3);
    const taken = createServer((socket) => socket.destroy()).listen(18000 + other, '127.0.0.1');
    await once(taken, 'listening');
    try {
      await expect(startServer({ AENV_POOL_SIZE: '1' }, other)).rejects.toThrow(/EADDRINUSE/);
    } finally {
      taken.close();
    }
    const netns = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    expect(netns).not.toContain(`aenv-e2e${other}-`);
    expect(runscLeft(`/run/aenv-e2e${other}`)).toEqual([]);
  });

  it('answers creates beyond capacity with 429 and Retry-After instead of timing out', async () => {
    // A node of its own, so this file's node keeps its settings for the other tests.
    const other = nearInstance(4);
    const small = await startServer({ AENV_MAX_SANDBOXES: '2', AENV_POOL_SIZE: '0' }, other);
    const onSmall = apiAt(urlOf(other));
    let results: Awaited<ReturnType<typeof onSmall>>[] = [];
    try {
      results = await Promise.all(
        Array.from({ length: 4 }, () => onSmall('POST', '/v2/sandboxes', { templateID: 'base' })),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses).toEqual([201, 201, 429, 429]);
      const refused = results.find((r) => r.status === 429)!;
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.json.message).toMatch(/maximum/);
    } finally {
      for (const r of results.filter((r) => r.status === 201))
        await onSmall('DELETE', `/sandboxes/${r.json.sandboxID as string}`);
      await small.stop();
      rmSync(homeOf(other), { recursive: true, force: true });
    }
  });
});

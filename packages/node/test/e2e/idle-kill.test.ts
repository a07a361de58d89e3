import { execFileSync } from 'node:child_process';
import { request } from 'node:http';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, DOMAIN, NODE_TAG as TAG, PORT, useTestServer } from '@agentenv/test-support/server';
import { CGROUPS, cgroups, frozen, ksmStats, loadCpu, pinTo } from './sandbox-cgroups.js';

// Frozen after 2 s without use; no warm pool, so the test's sandboxes are the only ones.
useTestServer({ AENV_IDLE_FREEZE_SECS: '2', AENV_POOL_SIZE: '0' });
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
}, 300_000);

/** The cgroup of the sandbox `create` makes (the one that was not there before). */
async function created(create: () => Promise<Sandbox>): Promise<{ sbx: Sandbox; cgroup: string }> {
  const before = cgroups();
  const sbx = await create();
  const fresh = [...cgroups()].filter((c) => !before.has(c));
  expect(fresh).toHaveLength(1);
  return { sbx, cgroup: fresh[0]! };
}

/** GET through the node's proxy with a `{port}-{id}.{domain}` Host, as a browser would. */
function getViaHost(host: string, path = '/'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: PORT, path, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const untilFrozen = (cgroup: string) =>
  eventually(() => expect(frozen(cgroup)).toBe(true), { timeoutMs: 30_000, intervalMs: 200 });

describe('idle sandboxes are frozen and thawed on use', () => {
  it('a frozen sandbox answers its next commands.run and its next proxied HTTP request', async () => {
    const { sbx, cgroup } = await created(() => Sandbox.create());
    try {
      // runtime.merge_pages is off by default: no page of this sandbox may be merged with another's.
      if (existsSync('/proc/self/ksm_stat'))
        for (const p of ksmStats(cgroup)) expect(p.ksm_merge_any).toBe('no');
      await sbx.files.write('/home/user/www/index.html', 'hello from a frozen sandbox');
      const server = await sbx.commands.run('cd /home/user/www && exec python3 -m http.server 8080', {
        background: true,
        timeoutMs: 0,
      });
      const host = `8080-${sbx.sandboxId}.${DOMAIN}`;
      await eventually(async () => expect((await getViaHost(host, '/index.html')).status).toBe(200));
      // An open command stream counts as use (unit-tested); let go of it so the sandbox can idle.
      await server.disconnect();

      await untilFrozen(cgroup);
      const r = await sbx.commands.run('echo awake');
      expect(r.stdout).toBe('awake\n');
      expect(frozen(cgroup)).toBe(false);

      await untilFrozen(cgroup);
      expect(await getViaHost(host, '/index.html')).toEqual({
        status: 200,
        body: 'hello from a frozen sandbox',
      });
      expect(frozen(cgroup)).toBe(false);

      await untilFrozen(cgroup);
      expect(await sbx.isRunning()).toBe(true);
      const info = await api('GET', `/sandboxes/${sbx.sandboxId}`);
      expect(info.json.state).toBe('running');
    } finally {
      await sbx.kill();
    }
  }, 180_000);

  it('a job left running with nohup keeps its sandbox awake until it ends, requests or not, on a loaded host too', async () => {
    const { sbx, cgroup } = await created(() => Sandbox.create());
    // Host CPU 1 shared with 12 busy sessions: the job gets about 1/13 of it, under the 15 % bar.
    pinTo(cgroup, 1);
    const load = loadCpu(1, 12);
    try {
      // Busy for 5 s of wall time, 2.5 times the idle freeze, with no request reaching the sandbox.
      await sbx.commands.run(
        'nohup sh -c \'timeout 5 sh -c "while :; do :; done"; echo done > /tmp/job\' >/dev/null 2>&1 &',
      );
      const started = Date.now();
      let frozenWhileBusy = 0;
      while (Date.now() - started < 4000) {
        if (frozen(cgroup)) frozenWhileBusy++;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(frozenWhileBusy).toBe(0);
      load.stop();
      // Once the job is done, the sandbox is idle: frozen, and the job's last step did run.
      await untilFrozen(cgroup);
      expect(await sbx.files.read('/tmp/job')).toBe('done\n');
    } finally {
      load.stop();
      await sbx.kill();
    }
  }, 180_000);

  it('a frozen sandbox can be paused and resumed', async () => {
    const { sbx, cgroup } = await created(() => Sandbox.create());
    try {
      await sbx.files.write('/home/user/kept', 'kept');
      await untilFrozen(cgroup);
      await sbx.pause();
      const again = await Sandbox.connect(sbx.sandboxId);
      expect(await again.files.read('/home/user/kept')).toBe('kept');
    } finally {
      await sbx.kill();
    }
  }, 180_000);
});

/** The node's network namespaces and runsc processes (for one runtime sandbox: its own). */
function hostFootprint(cgroup: string) {
  return {
    cgroup: existsSync(join(CGROUPS, cgroup)),
    runsc: execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.startsWith('runsc') && l.includes(cgroup)).length,
    namespaces: execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.startsWith(`aenv-${TAG}-`)).length,
  };
}

/**
 * The node's namespace count once the sandboxes of earlier tests are reclaimed: kill answers
 * before that, so right after one the count still holds its slot. Settled = no sandbox cgroup
 * left and the same count on two reads a second apart.
 */
async function settledNamespaces(): Promise<number> {
  let last = -1;
  return eventually(
    () => {
      const n = hostFootprint('none').namespaces;
      const steady = n === last;
      last = n;
      expect(cgroups().size).toBe(0);
      expect(steady).toBe(true);
      return n;
    },
    { timeoutMs: 60_000, intervalMs: 1000 },
  );
}

describe('kill', () => {
  it('a killed sandbox is unreachable at once; its resources are gone after the reclaim', async () => {
    const namespacesBefore = await settledNamespaces();
    const { sbx, cgroup } = await created(() => Sandbox.create());
    await sbx.commands.run('cd /tmp && python3 -m http.server 8081', { background: true, timeoutMs: 0 });
    const host = `8081-${sbx.sandboxId}.${DOMAIN}`;
    await eventually(async () => expect((await getViaHost(host)).status).toBe(200));
    expect(hostFootprint(cgroup).cgroup).toBe(true);

    await sbx.kill();
    // Right after the answer: gone from the API and the proxy.
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
    expect((await getViaHost(host)).status).toBe(502);
    expect(await sbx.isRunning()).toBe(false);
    expect((await api('GET', '/v2/sandboxes')).json).toEqual([]);

    await eventually(
      () => expect(hostFootprint(cgroup)).toEqual({ cgroup: false, runsc: 0, namespaces: namespacesBefore }),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  }, 180_000);

  it('a frozen sandbox is killed without a thaw', async () => {
    const { sbx, cgroup } = await created(() => Sandbox.create());
    await untilFrozen(cgroup);
    await sbx.kill();
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
    await eventually(() => expect(hostFootprint(cgroup).cgroup).toBe(false), {
      timeoutMs: 60_000,
      intervalMs: 200,
    });
  }, 180_000);
});

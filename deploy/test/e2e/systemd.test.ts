import path from 'node:path';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseLayerBinds } from '../support/base-layer.js';
import { firewallRules } from '../support/firewall.js';
import { holdE2eLock } from '../support/lock.js';
import { BootedDebian } from '../support/nspawn.js';
import { CACHE, REPO, releaseTarball } from '../support/release.js';
import { until, run } from '../support/run.js';

/**
 * The release installed with scripts/install.sh into a fresh Debian 12 root booted by
 * systemd-nspawn, driven with systemctl inside. The container shares the host's network, so the
 * node gets its own port, network tag and range (set the way an operator would, in its config).
 */
const PORT = 18200;
const TAG = 'dt';
const SCHEDULER_PORT = 18201;
const GATEWAY_PORT = 18202;
const URL_BASE = `http://127.0.0.1:${PORT}`;
const GATEWAY = `http://127.0.0.1:${GATEWAY_PORT}`;
const INSTALLED = ['/opt/aenv', '/etc/aenv', '/etc/default/aenv', '/etc/systemd/system', '/usr/local/bin'];

const missing =
  process.getuid?.() !== 0
    ? 'systemd-nspawn needs root'
    : (await run('sh', ['-c', 'command -v systemd-nspawn && command -v mmdebstrap'])).code !== 0
      ? 'systemd-nspawn or mmdebstrap is not installed (bash scripts/setup.sh --deploy installs them)'
      : undefined;
if (missing) console.warn(`deploy/test/e2e/systemd.test.ts skipped: ${missing}`);

describe.skipIf(missing !== undefined)('install.sh + systemd in a booted Debian 12 (systemd-nspawn)', () => {
  let machine: BootedDebian;
  let release: () => void = () => undefined;
  let tarball = '';
  let apiKey = '';
  let firewallBefore: string[] = [];

  const inside = (script: string) => machine.exec(['bash', '-c', script]);
  const insideOk = (script: string) => machine.mustExec(['bash', '-c', script]);
  /** Every installed path with its type, size, mode, mtime and link target. */
  const installedState = () =>
    insideOk(`find ${INSTALLED.join(' ')} -printf '%p %y %s %m %T@ %l\\n' 2>/dev/null | sort`);
  const health = () =>
    fetch(`${URL_BASE}/health`).then(
      (r) => r.status,
      () => 0,
    );

  beforeAll(async () => {
    release = await holdE2eLock();
    firewallBefore = await firewallRules();
    tarball = await releaseTarball();
    machine = await BootedDebian.create('aenv-deploy-test', path.join(CACHE, 'machines'));
    await machine.boot([
      { host: path.dirname(tarball), guest: '/mnt/release', readOnly: true },
      { host: path.join(REPO, 'scripts'), guest: '/mnt/scripts', readOnly: true },
      ...baseLayerBinds('/var/lib/aenv'),
    ]);
  });

  afterAll(async () => {
    try {
      await machine?.remove();
      // The container's node shared the host's firewall: nothing of it may be left.
      expect(await firewallRules([TAG])).toEqual(firewallBefore);
      const links = await run('ip', ['-o', 'link', 'show']);
      expect(links.stdout.split('\n').filter((l) => l.includes(` ae-${TAG}-`))).toEqual([]);
    } finally {
      release();
    }
  });

  it('installs the tarball with --role all; the units pass systemd-analyze verify', async () => {
    const r = await inside(
      `/mnt/scripts/install.sh --role all --from /mnt/release/${path.basename(tarball)} --no-start`,
    );
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(await insideOk('readlink /opt/aenv/current')).toMatch(/^\d+\.\d+\.\d+/);
    expect(await insideOk('aenv --help')).toContain('Usage: aenv');
    apiKey = (await insideOk("sed -n 's/^AENV_API_KEY=//p' /etc/default/aenv")).trim();
    expect(apiKey).toMatch(/^e2b_[0-9a-f]{40}$/);
    expect(await insideOk('stat -c %a /etc/default/aenv')).toBe('600\n');
    const units = (await insideOk('ls /etc/systemd/system/aenv*.service')).trim().split('\n');
    expect(units).toEqual(
      ['aenv-gateway', 'aenv-scheduler', 'aenv'].map((u) => `/etc/systemd/system/${u}.service`),
    );
    // `all` on one host is a one-host cluster: the node registers with the scheduler beside it,
    // which listens on loopback only.
    const env = await insideOk('cat /etc/default/aenv');
    expect(env).toMatch(/^AENV_SCHEDULER_URL=http:\/\/127\.0\.0\.1:9090$/m);
    expect(env).toMatch(/^SCHEDULER_ADDR=127\.0\.0\.1:9090$/m);
    for (const unit of units) {
      const verify = await inside(`systemd-analyze verify ${unit}`);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
      expect(verify.stderr).toBe('');
    }
  });

  it('a second run changes nothing and keeps the operator’s edited config', async () => {
    // The operator's edits: a port of its own, and a network tag and range apart from the host's nodes.
    await insideOk(`sed -i 's/^api_addr = .*/api_addr = "127.0.0.1:${PORT}"/' /etc/aenv/config.toml`);
    await insideOk(
      `printf '%s\\n' ${[
        `AENV_NETWORK_NODE_TAG=${TAG}`,
        'AENV_NETWORK_HOST_RANGE=10.170.0.0/16',
        'AENV_POOL_SIZE=0',
        `SCHEDULER_ADDR=127.0.0.1:${SCHEDULER_PORT}`,
        `GATEWAY_ADDR=127.0.0.1:${GATEWAY_PORT}`,
        `AENV_SCHEDULER_URL=http://127.0.0.1:${SCHEDULER_PORT}`,
      ].join(' ')} >> /etc/default/aenv`,
    );
    const config = await insideOk('cat /etc/aenv/config.toml /etc/default/aenv');
    const before = await installedState();
    const again = await inside(
      `/mnt/scripts/install.sh --role all --from /mnt/release/${path.basename(tarball)} --no-start`,
    );
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toContain('nothing changed');
    expect(await installedState()).toEqual(before);
    expect(await insideOk('cat /etc/aenv/config.toml /etc/default/aenv')).toEqual(config);
  });

  it('systemctl start aenv-scheduler aenv-gateway: both answer /health', async () => {
    await insideOk('systemctl start aenv-scheduler aenv-gateway');
    expect(await insideOk('systemctl is-active aenv-scheduler aenv-gateway')).toBe('active\nactive\n');
    for (const url of [`http://127.0.0.1:${SCHEDULER_PORT}/health`, `${GATEWAY}/health`]) {
      await until(`${url} 204`, async () => (await fetch(url).catch(() => undefined))?.status === 204);
    }
  });

  it('systemctl start aenv brings up a node that answers /health and joins the scheduler', async () => {
    await insideOk('systemctl start aenv');
    expect(await insideOk('systemctl is-active aenv')).toBe('active\n');
    await until('/health 204', async () => (await health()) === 204, { timeoutMs: 60_000 });
    await joined();
  });

  /** The node is placeable again: it joins the scheduler once `base` is ready, after /health. */
  async function joined(): Promise<void> {
    const nodeId = (await insideOk('hostname')).trim();
    await until('the node ready in the gateway’s /nodes', async () => {
      const r = await fetch(`${GATEWAY}/nodes`, { headers: { 'x-api-key': apiKey } });
      const nodes = (await r.json()) as { nodeID: string; status: string }[];
      return nodes.some((n) => n.nodeID === nodeId && n.status === 'ready');
    });
  }

  it('systemctl stop aenv pauses a running sandbox; after a start it resumes with its memory (through the gateway)', async () => {
    process.env.E2B_API_URL = GATEWAY;
    process.env.E2B_SANDBOX_URL = GATEWAY;
    process.env.E2B_API_KEY = apiKey;
    const sbx = await Sandbox.create({ timeoutMs: 600_000 });
    // A process that only lives in memory: a counter it keeps and writes out.
    await sbx.commands.run(
      "python3 -c \"import time\nn=0\nwhile True:\n  n+=1\n  open('/tmp/count','w').write(str(n))\n  time.sleep(0.1)\"",
      { background: true, timeoutMs: 0 },
    );
    await sbx.files.write('/home/user/kept.txt', 'across a systemctl stop');
    const counted = await until(
      'the counter to run',
      async () => Number(await sbx.files.read('/tmp/count')) > 2,
    );
    expect(counted).toBe(true);
    const pid = (await sbx.commands.run('pgrep -f "[t]mp/count"')).stdout.trim();

    await insideOk('systemctl stop aenv');
    expect((await inside('systemctl is-active aenv')).stdout.trim()).toBe('inactive');
    expect(await health()).toBe(0);
    const journal = await insideOk('journalctl -u aenv --no-pager -o cat');
    expect(journal).toContain('shutting down: pausing running sandboxes');

    await insideOk('systemctl start aenv');
    await until('/health 204 after the restart', async () => (await health()) === 204, { timeoutMs: 60_000 });
    await joined();
    const info = await fetch(`${URL_BASE}/sandboxes/${sbx.sandboxId}`, { headers: { 'x-api-key': apiKey } });
    expect(((await info.json()) as { state: string }).state).toBe('paused');

    const again = await Sandbox.connect(sbx.sandboxId);
    expect(await again.files.read('/home/user/kept.txt')).toBe('across a systemctl stop');
    const resumedAt = Number(await again.files.read('/tmp/count'));
    expect((await again.commands.run('pgrep -f "[t]mp/count"')).stdout.trim()).toBe(pid);
    await until(
      'the counter to go on from where it was',
      async () => Number(await again.files.read('/tmp/count')) > resumedAt,
    );
    await again.kill();
  });

  it('ships the node’s native helpers, which run on the installed system', async () => {
    // Volumes need loop devices, which a container has not: the helpers are run themselves.
    const dir = '/opt/aenv/current/app/packages/node/native/build';
    for (const helper of ['aenv-volfs', 'aenv-reaper']) {
      const r = await inside(`${dir}/${helper}`);
      expect(r.code, `${helper}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(`usage: ${helper} `);
    }
    // And a volume is refused saying what is missing.
    const create = () =>
      fetch(`${URL_BASE}/volumes`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'no-loop' }),
      });
    const r = await create();
    expect(r.status).toBe(500);
    expect(((await r.json()) as { message: string }).message).toMatch(/cannot mount volume images.*loop/);
    // Not 409 "already exists": the failed create left nothing under the name.
    expect((await create()).status).toBe(500);
  });

  it('uninstall.sh removes everything but /var/lib/aenv (--purge that too), and a killed node’s chains', async () => {
    // A node killed outright leaves its chains and jumps on the (shared) host firewall.
    await insideOk('systemctl start aenv');
    await until('/health 204', async () => (await health()) === 204, { timeoutMs: 60_000 });
    await insideOk('systemctl kill --kill-whom=main --signal=SIGKILL aenv && systemctl stop aenv');
    expect((await firewallRules([TAG])).some((l) => l.includes(`AENV-${TAG}-FWD`))).toBe(true);
    const r = await inside('/opt/aenv/current/scripts/uninstall.sh');
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(await health()).toBe(0);
    expect(await fetch(`${GATEWAY}/health`).catch(() => 'stopped')).toBe('stopped');
    expect(
      (await inside('ls /opt/aenv /etc/aenv /etc/default/aenv /etc/systemd/system/aenv.service 2>&1')).code,
    ).not.toBe(0);
    expect(await insideOk('cat /var/lib/aenv/secrets/api-key')).toBe(`${apiKey}\n`);
    expect(await firewallRules([TAG])).toEqual(firewallBefore);
    const purge = await inside('bash /mnt/scripts/uninstall.sh --purge');
    expect(purge.code, purge.stdout + purge.stderr).toBe(0);
    expect((await inside('test -e /var/lib/aenv')).code).toBe(1);
    const twice = await inside('bash /mnt/scripts/uninstall.sh --purge');
    expect(twice.code).toBe(0);
  });
});

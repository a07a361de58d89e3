import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalDocker } from '@agentenv/test-support/docker';
import { baseLayerBinds } from '../support/base-layer.js';
import { firewallRules } from '../support/firewall.js';
import { holdE2eLock } from '../support/lock.js';
import { REPO, releaseTarball } from '../support/release.js';
import { until, run } from '../support/run.js';

/**
 * scripts/build-images.sh against a Docker engine this file starts (own data root, no bridge, no
 * iptables) with no registry: the base is made locally. The node image then runs a sandbox on
 * the host network with a port, tag and range of its own.
 */
const WORK = '/var/tmp/aenv-deploy-test-docker';
const PORT = 18210;
const TAG = 'di';
const URL_BASE = `http://127.0.0.1:${PORT}`;
const API_KEY = `e2b_${'cd'.repeat(20)}`;
const COMPOSE_PORT = 18220;
/**
 * `--privileged` asks for every capability, which fails where the bounding set lacks one (here
 * CAP_SYS_RESOURCE). Instead: every capability Docker 20.10 can name beyond its defaults except
 * SYS_RESOURCE (MACHINE-RECIPES.md: gVisor runs with these); docs/deploy.md lists the same.
 */
export const NODE_CAPABILITIES = [
  'AUDIT_CONTROL',
  'AUDIT_READ',
  'BLOCK_SUSPEND',
  'DAC_READ_SEARCH',
  'IPC_LOCK',
  'IPC_OWNER',
  'LEASE',
  'LINUX_IMMUTABLE',
  'MAC_ADMIN',
  'MAC_OVERRIDE',
  'NET_ADMIN',
  'NET_BROADCAST',
  'SYSLOG',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_MODULE',
  'SYS_NICE',
  'SYS_PACCT',
  'SYS_PTRACE',
  'SYS_RAWIO',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'WAKE_ALARM',
];

const missing = LocalDocker.missing();
if (missing) console.warn(`deploy/test/e2e/docker.test.ts skipped: ${missing}`);

describe.skipIf(missing !== undefined)(
  'container images built with scripts/build-images.sh (no registry)',
  () => {
    const engine = new LocalDocker(path.join(WORK, 'engine'));
    let release: () => void = () => undefined;
    let version = '';
    let firewallBefore: string[] = [];
    /** Whether this host lets Docker grant every capability (else the explicit list is used). */
    let privilegedWorks = true;

    beforeAll(async () => {
      release = await holdE2eLock();
      firewallBefore = await firewallRules();
      const tarball = await releaseTarball();
      version = /aenv-(.+)-linux-/.exec(path.basename(tarball))![1]!;
      await engine.start();
    });

    afterAll(async () => {
      try {
        await engine.stop();
        rmSync(WORK, { recursive: true, force: true });
        // The nodes' cgroup parents (the host's hierarchies were theirs): empty, so removable.
        const left = await run('sh', [
          '-c',
          `for d in /sys/fs/cgroup/*/aenv-${TAG} /sys/fs/cgroup/*/aenv-c1 /sys/fs/cgroup/*/aenv-c2; do [ ! -d "$d" ] || rmdir "$d" || echo "$d"; done`,
        ]);
        expect(left.stdout).toBe('');
        expect(await firewallRules([TAG])).toEqual(firewallBefore);
        expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(WORK);
      } finally {
        release();
      }
    });

    it('builds the node, control and Redis images from the release, the base made with mmdebstrap', async () => {
      const r = await run(
        'bash',
        [
          path.join(REPO, 'scripts/build-images.sh'),
          '--local-base',
          '--network',
          'host',
          '--from',
          await releaseTarball(),
        ],
        {
          env: engine.env,
          timeoutMs: 1_500_000,
        },
      );
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const images = (await engine.mustDocker(['images', '--format', '{{.Repository}}:{{.Tag}}'])).split(
        '\n',
      );
      expect(images).toContain(`aenv/node:${version}`);
      expect(images).toContain(`aenv/redis:${version}`);
      const hasControl = (await run('tar', ['-tzf', await releaseTarball()])).stdout.includes(
        '/bin/aenv-gateway',
      );
      if (hasControl) expect(images).toContain(`aenv/control:${version}`);
    });

    it('docker run of the node image answers /health and runs a sandbox; docker stop leaves no rules', async () => {
      const state = path.join(WORK, 'state');
      mkdirSync(state, { recursive: true });
      const common = [
        '--network',
        'host',
        '--cgroupns',
        'host',
        '-v',
        '/sys/fs/cgroup:/sys/fs/cgroup',
        '-v',
        '/dev:/dev',
        '-v',
        `${state}:/var/lib/aenv`,
        ...baseLayerBinds('/var/lib/aenv').flatMap((b) => ['-v', `${b.host}:${b.guest}:ro`]),
        '-e',
        `API_ADDR=127.0.0.1:${PORT}`,
        '-e',
        `AENV_API_KEY=${API_KEY}`,
        '-e',
        'AENV_POOL_SIZE=0',
        '-e',
        `AENV_NETWORK_NODE_TAG=${TAG}`,
        '-e',
        'AENV_NETWORK_HOST_RANGE=10.171.0.0/16',
        '-e',
        `AENV_RUNTIME_PATH=/run/aenv-${TAG}`,
      ];
      const image = `aenv/node:${version}`;
      // Privileged where the host allows it, else the explicit list.
      let started = await engine.docker([
        'run',
        '-d',
        '--name',
        'aenv-node',
        '--privileged',
        ...common,
        image,
      ]);
      if (started.code !== 0) {
        privilegedWorks = false;
        expect(started.stderr).toMatch(/unable to apply caps|operation not permitted/);
        await engine.docker(['rm', '-f', 'aenv-node']);
        const caps = NODE_CAPABILITIES.flatMap((c) => ['--cap-add', c]);
        const security = [
          '--security-opt',
          'seccomp=unconfined',
          '--security-opt',
          'apparmor=unconfined',
          // Docker mounts /proc/sys read-only; the node sets ip_forward in its router namespaces.
          '--security-opt',
          'systempaths=unconfined',
        ];
        started = await engine.docker([
          'run',
          '-d',
          '--name',
          'aenv-node',
          ...caps,
          ...security,
          ...common,
          image,
        ]);
      }
      expect(started.code, started.stderr).toBe(0);
      const logs = () => engine.docker(['logs', 'aenv-node']).then((l) => l.stdout + l.stderr);
      await until(
        '/health 204 from the container',
        async () => {
          const status = await fetch(`${URL_BASE}/health`).then(
            (r) => r.status,
            () => 0,
          );
          if (
            status === 0 &&
            !(await engine.docker(['inspect', '-f', '{{.State.Running}}', 'aenv-node'])).stdout.includes(
              'true',
            )
          ) {
            throw new Error(`the node container exited:\n${await logs()}`);
          }
          return status === 204;
        },
        { timeoutMs: 90_000 },
      );

      process.env.E2B_API_URL = URL_BASE;
      process.env.E2B_SANDBOX_URL = URL_BASE;
      process.env.E2B_API_KEY = API_KEY;
      const sbx = await Sandbox.create().catch(async (err: unknown) => {
        throw new Error(`create failed (${String(err)}); the node said:\n${(await logs()).slice(-6000)}`);
      });
      const out = await sbx.commands.run('python3 -c "print(6*7)"');
      expect(out.stdout.trim()).toBe('42');

      const stop = await engine.docker(['stop', '-t', '300', 'aenv-node'], { timeoutMs: 400_000 });
      expect(stop.code).toBe(0);
      expect((await engine.mustDocker(['inspect', '-f', '{{.State.ExitCode}}', 'aenv-node'])).trim()).toBe(
        '0',
      );
      expect(await logs()).toContain('shutting down: pausing running sandboxes');
      expect(await firewallRules([TAG])).toEqual(firewallBefore);
    });

    /**
     * The Compose cluster on the same engine and images. The gateway is published on a port of the
     * test's own (AENV_GATEWAY_PORT; the file's default is 8000).
     */
    describe('docker-compose up: the Compose cluster', () => {
      const GATEWAY = `http://127.0.0.1:${COMPOSE_PORT}`;
      const dir = path.join(WORK, 'compose');
      let files: string[] = [];
      const compose = (args: string[], timeoutMs = 900_000) =>
        run('docker-compose', ['-p', 'aenvtest', ...files.flatMap((f) => ['-f', f]), ...args], {
          env: {
            ...engine.env,
            AENV_VERSION: version,
            AENV_GATEWAY_PORT: String(COMPOSE_PORT),
            AENV_GATEWAY2_PORT: String(COMPOSE_PORT + 1),
          },
          cwd: dir,
          timeoutMs,
        });
      /** The sandboxes a node's own API lists (asked inside its container). */
      const onNode = async (service: string): Promise<string[]> => {
        const r = await compose([
          'exec',
          '-T',
          service,
          'curl',
          '-sf',
          '-H',
          `x-api-key: ${API_KEY}`,
          'http://127.0.0.1:8000/v2/sandboxes?limit=100',
        ]);
        if (r.code !== 0) return [];
        return (JSON.parse(r.stdout) as { sandboxID: string }[]).map((s) => s.sandboxID);
      };

      it('creates sandboxes on both nodes, and a paused one resumes on the other node once its node stops', async (ctx) => {
        const images = await engine.mustDocker(['images', '--format', '{{.Repository}}:{{.Tag}}']);
        if (!images.includes(`aenv/control:${version}`)) {
          ctx.skip('the release has no aenv-scheduler/aenv-gateway yet, so there is no aenv/control image');
        }
        mkdirSync(dir, { recursive: true });
        cpSync(path.join(REPO, 'deploy', 'compose'), dir, { recursive: true });
        writeFileSync(path.join(dir, 'api-key'), `${API_KEY}\n`);
        files = [path.join(dir, 'docker-compose.yml')];
        if (!privilegedWorks) files.push(path.join(dir, 'no-privileged.yml'));
        // Test-only: both nodes borrow the host's cached base root filesystem, as `docker run`
        // above does, instead of each building it with mmdebstrap at once on a small machine.
        const binds = baseLayerBinds('/var/lib/aenv').map((b) => `${b.host}:${b.guest}:ro`);
        if (binds.length > 0) {
          // Compose merges volume lists by their target, so the nodes keep their own volumes.
          const services = Object.fromEntries(['node1', 'node2'].map((n) => [n, { volumes: binds }]));
          writeFileSync(path.join(dir, 'cached-base.yml'), JSON.stringify({ version: '3.8', services }));
          files.push(path.join(dir, 'cached-base.yml'));
        }
        const up = await compose(['up', '-d']);
        expect(up.code, up.stdout + up.stderr).toBe(0);
        try {
          // The nodes' healthchecks pass once their base template is ready (and they join then).
          await until(
            'both nodes healthy',
            async () => {
              const ids = (await compose(['ps', '-q', 'node1', 'node2'])).stdout.trim().split('\n');
              const r = await engine.docker([
                'inspect',
                '-f',
                '{{.Name}} {{.State.Status}} {{.State.Health.Status}}',
                ...ids,
              ]);
              if (/ unhealthy| exited | dead /.test(r.stdout))
                throw new Error(
                  `a node is unhealthy:\n${r.stdout}\n${(await compose(['logs', '--tail', '200'])).stdout}`,
                );
              return (
                r.code === 0 &&
                r.stdout
                  .trim()
                  .split('\n')
                  .every((l) => l.endsWith(' running healthy'))
              );
            },
            { timeoutMs: 900_000 },
          );
          await until(
            'the gateway to answer /health',
            async () => {
              const r = await fetch(`${GATEWAY}/health`).catch(() => undefined);
              return r !== undefined && r.status < 300;
            },
            { timeoutMs: 180_000 },
          );
          process.env.E2B_API_URL = GATEWAY;
          process.env.E2B_SANDBOX_URL = GATEWAY;
          process.env.E2B_API_KEY = API_KEY;
          // Both nodes registered: creates land on each of them.
          const created: Sandbox[] = [];
          await until(
            'sandboxes on both nodes',
            async () => {
              created.push(await Sandbox.create({ timeoutMs: 600_000 }));
              const [one, two] = await Promise.all([onNode('node1'), onNode('node2')]);
              return one.length > 0 && two.length > 0 ? true : undefined;
            },
            { timeoutMs: 300_000 },
          );
          const onOne = await onNode('node1');
          const sbx = created.find((s) => onOne.includes(s.sandboxId))!;
          await sbx.files.write('/home/user/kept.txt', 'from node1');
          await sbx.commands.run("sh -c 'echo $$ > /tmp/shell.pid; exec sleep 100000'", {
            background: true,
            timeoutMs: 0,
          });
          const pid = await until(
            'the background shell',
            async () => (await sbx.files.read('/tmp/shell.pid')).trim() || undefined,
          );
          await sbx.pause();
          // The second gateway serves the same cluster, and a scheduler replica may go.
          const stopped = await compose(['stop', '-t', '30', 'scheduler']);
          expect(stopped.code, stopped.stderr).toBe(0);
          const second = `http://127.0.0.1:${COMPOSE_PORT + 1}`;
          // The gateway's next scheduler call goes to the other replica (at most one failed try).
          const ids = await until(
            'the second gateway to list the sandboxes with one scheduler stopped',
            async () => {
              const r = await fetch(`${second}/v2/sandboxes?limit=100`, {
                headers: { 'x-api-key': API_KEY },
              });
              return r.status === 200
                ? ((await r.json()) as { sandboxID: string }[]).map((s) => s.sandboxID)
                : undefined;
            },
            { timeoutMs: 30_000 },
          );
          const running = created.filter((c) => c !== sbx).map((c) => c.sandboxId);
          expect(ids).toEqual(expect.arrayContaining(running));

          const stop = await compose(['stop', '-t', '300', 'node1']);
          expect(stop.code, stop.stderr).toBe(0);
          const again = await Sandbox.connect(sbx.sandboxId).catch(async (err: unknown) => {
            const logs = await compose([
              'logs',
              '--no-color',
              '--tail',
              '150',
              'node1',
              'scheduler2',
              'gateway',
            ]);
            throw new Error(`${String(err)}\n${logs.stdout}`);
          });
          expect(await onNode('node2')).toContain(sbx.sandboxId);
          expect(await again.files.read('/home/user/kept.txt')).toBe('from node1');
          // The same process, from the same memory.
          expect((await again.commands.run(`kill -0 ${pid} && echo alive`)).stdout.trim()).toBe('alive');
          for (const s of [again, ...created.filter((c) => c !== sbx)]) await s.kill().catch(() => undefined);
        } finally {
          const down = await compose(['down', '-v', '-t', '300']);
          expect(down.code, down.stderr).toBe(0);
          const project = ['--filter', 'label=com.docker.compose.project=aenvtest', '-q'];
          for (const kind of [
            ['ps', '-a'],
            ['network', 'ls'],
            ['volume', 'ls'],
          ])
            expect(await engine.mustDocker([...kind, ...project]), kind.join(' ')).toBe('');
          expect(await firewallRules([TAG, 'c1', 'c2'])).toEqual(firewallBefore);
        }
      });
    });
  },
);

import { cp, mkdir, open, readdir, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resources, RuntimeDriver, SandboxExit, SandboxHandle } from '../../src/runtime/driver.js';
import { CaptureInvalidError } from '@agentenv/snapshot';
import { CheckpointError, InvalidRequestError, RuntimeError } from '../../src/runtime/errors.js';
import { GvisorDriver } from '../../src/runtime/gvisor/driver.js';
import { createDriver } from '../../src/wiring/index.js';
import type { Template } from '../../src/templates/index.js';
import {
  EnvdClient,
  baseTemplate,
  mountsMentioning,
  processesMentioning,
  runscIds,
  TEST_HOME,
  createTestNet,
  destroyAllTestNets,
  type TestNet,
} from '@agentenv/test-support/runtime';
import { eventually, stressRounds } from '@agentenv/test-support';

/**
 * The same behaviour is required of every runtime driver: `conformance(name, made)` runs the
 * suite against the driver it is given. A driver whose host prerequisites are missing (or that
 * the node refuses to build) is skipped, and the reason is printed.
 */
type MadeDriver = { driver: RuntimeDriver; runscRoot?: string } | { skip: string };

interface DriverCase {
  name: string;
  make: () => Promise<MadeDriver>;
}

const RUNTIME_DIR = `/run/aenv-test/${process.pid}`;
const PLACEMENT = { runtimePath: RUNTIME_DIR, nodeTag: 'conf' };

const cases: DriverCase[] = [
  {
    name: 'gvisor',
    make: async () => {
      const driver = new GvisorDriver({ runtimeDir: RUNTIME_DIR, monitorIntervalMs: 200 });
      const p = await driver.probe();
      return p.available ? { driver, runscRoot: `${RUNTIME_DIR}/runsc` } : { skip: p.reason };
    },
  },
  {
    name: 'firecracker',
    // What the node does with `[runtime] driver = "firecracker"`: refuse, saying why.
    make: async () => {
      try {
        return { driver: createDriver({ driver: 'firecracker', virtualizationMode: 'pvm' }, PLACEMENT) };
      } catch (e) {
        return {
          skip: `${(e as Error).message} (and this host has PVM-only KVM and no firecracker binary, RUNTIME.md)`,
        };
      }
    },
  },
];

const SMALL: Resources = { cpuCount: 1, memoryMB: 512, diskSizeMB: 512 };
/**
 * Restores of one capture at once: a few prove them independent of each other and of the source
 * (the node's sixteen forks at once are its e2e suite's, snapshots.test.ts); AENV_TEST_STRESS=1
 * restores sixteen here too.
 */
const RESTORES = stressRounds(4, 16);

for (const c of cases) conformance(c.name, await c.make());

function conformance(name: string, made: MadeDriver): void {
  const skip = 'skip' in made ? made.skip : null;
  if (skip) console.warn(`[conformance] driver ${name} SKIPPED: ${skip}`);

  describe.skipIf(skip !== null)(`runtime driver conformance: ${name}`, () => {
    const driver = 'driver' in made ? made.driver : (null as unknown as RuntimeDriver);
    const runscRoot = 'driver' in made ? made.runscRoot : undefined;
    let template: Template;
    const handles: SandboxHandle[] = [];
    const nets = new Map<string, TestNet>();
    const scratch = join(TEST_HOME, 'scratch', String(process.pid));
    const exits: SandboxExit[] = [];

    const client = (h: SandboxHandle) => new EnvdClient(h.net!.hostAddress, h.envdPort);
    const track = (h: SandboxHandle, net: TestNet) => {
      handles.push(h);
      nets.set(h.id, net);
      return h;
    };
    const fresh = async (resources = SMALL) => {
      const net = createTestNet();
      try {
        const h = await driver.start({
          layers: template.layers,
          mounts: template.mounts,
          init: template.init,
          resources,
          net,
          envdPort: template.envdPort,
        });
        return track(h, net);
      } catch (e) {
        net.destroy();
        throw e;
      }
    };
    const restore = async (dir: string, resources = SMALL) => {
      const net = createTestNet();
      try {
        return track(await driver.restore({ capture: dir, resources, net }), net);
      } catch (e) {
        net.destroy();
        throw e;
      }
    };
    const kill = async (h: SandboxHandle) => {
      await driver.kill(h);
      nets.get(h.id)?.destroy();
    };

    beforeAll(async () => {
      driver.onExit((e) => exits.push(e));
      template = await baseTemplate(driver);
      await mkdir(scratch, { recursive: true });
    });

    afterAll(async () => {
      for (const h of handles) await driver.kill(h).catch(() => undefined);
      await driver.close().catch(() => undefined);
      destroyAllTestNets();
      await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
      await rm(RUNTIME_DIR, { recursive: true, force: true }).catch(() => undefined);
    });

    it('starts a fresh sandbox from the template and runs commands through envd', async () => {
      const h = await fresh();
      const envd = client(h);
      expect(await envd.health()).toBe(204);
      expect((await envd.stat('/')).type).toBe('FILE_TYPE_DIRECTORY');
      const r = await envd.run('echo hi; id -un; python --version; node --version; git --version');
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toMatch(/^hi\nroot\nPython 3\.\d+/);
      const u = await envd.run('id -un; echo $HOME', 'user');
      expect(u.stdout).toBe('user\n/home/user\n');
      // runsc 20240729 sets no_new_privs on every sandbox process whatever the OCI spec says, so
      // setuid sudo cannot raise privileges; report it rather than fail on the runtime's limit.
      const sudo = await envd.run('sudo -n true 2>&1 && echo sudo-ok', 'user');
      if (!sudo.stdout.includes('sudo-ok'))
        console.warn(`[conformance] ${name}: sudo as user fails: ${sudo.stdout.trim()}`);
      await kill(h);
    });

    it('round-trips a file', async () => {
      const h = await restore(template.capture.dir);
      const envd = client(h);
      const data = Buffer.from(Array.from({ length: 100_000 }, (_, i) => i % 251));
      await envd.upload('/tmp/x', data);
      expect((await envd.download('/tmp/x')).equals(data)).toBe(true);
      expect((await envd.run('sha256sum < /tmp/x | cut -c1-16')).stdout.trim()).toHaveLength(16);
      await kill(h);
    });

    // A background process that keeps a secret only in memory and a counter; it writes both to
    // /tmp/state when /tmp/dump appears, so the test can read its memory from outside. It looks
    // every 50 ms: up to seventeen copies of it run at once below, and a tighter loop starves the host.
    const COUNTER =
      "nohup python3 -c \"import os,time,random\ns=random.getrandbits(60);n=0\nwhile True:\n n+=1\n if os.path.exists('/tmp/dump'):\n  open('/tmp/state.tmp','w').write(f'{s} {n}');os.rename('/tmp/state.tmp','/tmp/state');os.remove('/tmp/dump')\n time.sleep(0.05)\" >/dev/null 2>&1 &";
    const readMemory = async (envd: EnvdClient): Promise<{ secret: string; n: number }> => {
      // One round trip: the wait for the counter's answer runs inside the sandbox.
      const r = await envd.run(
        'rm -f /tmp/state; touch /tmp/dump; for i in $(seq 200); do [ -e /tmp/state ] && break; sleep 0.05; done; cat /tmp/state',
      );
      const m = /^(\d+) (\d+)$/.exec(r.stdout.trim());
      if (!m) throw new Error(`the counter process did not answer: ${r.stdout}${r.stderr}`);
      return { secret: m[1]!, n: Number(m[2]) };
    };

    let forkCapture = '';
    let source: SandboxHandle;
    let sourceMemory: { secret: string; n: number };

    it('checkpoint + restore keeps a running process memory and the files', async () => {
      source = await restore(template.capture.dir);
      const envd = client(source);
      await envd.run(COUNTER);
      await envd.upload('/home/user/notes.txt', Buffer.from('before checkpoint'));
      await envd.run('echo rootfs-write > /etc/aenv-marker');
      sourceMemory = await readMemory(envd);
      forkCapture = join(scratch, 'fork');
      const cap = await driver.checkpoint(source, { dir: forkCapture, leaveRunning: true });
      expect(cap.meta.runtimeVersion).toBeTruthy();
      expect(cap.meta.resources).toEqual(SMALL);
      expect(await driver.status(source)).toBe('running');

      const child = await restore(forkCapture);
      const ce = client(child);
      const mem = await readMemory(ce);
      expect(mem.secret).toBe(sourceMemory.secret);
      expect(mem.n).toBeGreaterThanOrEqual(sourceMemory.n);
      expect((await ce.download('/home/user/notes.txt')).toString()).toBe('before checkpoint');
      expect((await ce.run('cat /etc/aenv-marker')).stdout).toBe('rootfs-write\n');
      await kill(child);
    });

    it(`${RESTORES} restores of one capture are independent while the source keeps running`, async () => {
      const t = Date.now();
      const children = await Promise.all(Array.from({ length: RESTORES }, () => restore(forkCapture)));
      console.log(`[conformance] ${name}: ${RESTORES} parallel restores ready in ${Date.now() - t} ms`);
      const clients = children.map(client);
      await Promise.all(
        clients.map((e, i) => e.run(`echo child-${i} > /tmp/who; echo ${i} >> /home/user/notes.txt`)),
      );
      const mems = await Promise.all(clients.map(readMemory));
      for (const m of mems) expect(m.secret).toBe(sourceMemory.secret);
      await Promise.all(
        clients.map(async (e, i) => {
          expect((await e.run('cat /tmp/who')).stdout).toBe(`child-${i}\n`);
          expect((await e.download('/home/user/notes.txt')).toString()).toBe(`before checkpoint${i}\n`);
          // Its own network: the address it answers on is its own namespace's.
          const addrs = (await e.run("ip -4 -o addr show | grep -v ' lo ' | awk '{print $4}'")).stdout.trim();
          expect(addrs).toBe(`${children[i]!.net!.hostAddress}/30`);
        }),
      );
      // The source was not touched by any child and still runs with its own memory.
      const se = client(source);
      expect(await se.health()).toBe(204);
      expect((await se.download('/home/user/notes.txt')).toString()).toBe('before checkpoint');
      await expect(se.run('cat /tmp/who')).resolves.toMatchObject({ exitCode: 1 });
      expect((await readMemory(se)).secret).toBe(sourceMemory.secret);
      await Promise.all(children.map(kill));
    });

    it('pauses and resumes in place', async () => {
      const envd = client(source);
      await driver.pause(source);
      expect(await driver.status(source)).toBe('paused');
      await expect(envd.health(500)).rejects.toThrow();
      await driver.resume(source);
      expect(await driver.status(source)).toBe('running');
      expect(await envd.health()).toBe(204);
      expect((await readMemory(envd)).secret).toBe(sourceMemory.secret);
    });

    it('freezes and thaws: a frozen sandbox answers nothing until thawed, then as before', async () => {
      const envd = client(source);
      await driver.freeze(source);
      expect(await driver.status(source)).toBe('frozen');
      await expect(envd.health(500)).rejects.toThrow();
      await driver.thaw(source);
      expect(await driver.status(source)).toBe('running');
      expect(await envd.health()).toBe(204);
      expect((await readMemory(envd)).secret).toBe(sourceMemory.secret);
      // Operations that need the sandbox thaw it first.
      await driver.freeze(source);
      const cap = await driver.checkpoint(source, { dir: join(scratch, 'frozen-cap'), leaveRunning: true });
      expect(await driver.status(source)).toBe('frozen');
      await driver.thaw(source);
      const copy = await restore(cap.dir);
      expect((await readMemory(client(copy))).secret).toBe(sourceMemory.secret);
      await driver.freeze(copy);
      await kill(copy);
      await driver.released(copy.id);
      expect(processesMentioning(copy.id)).toEqual([]);
    });

    it('reports stats, with measured memory', async () => {
      const s = await driver.stats(source);
      expect(s.cpuNs).toBeGreaterThan(0);
      expect(s.memoryBytes).toBeGreaterThan(1 << 20);
      expect(s.workingSetBytes).toBeGreaterThan(1 << 20);
      expect(s.workingSetBytes).toBeLessThanOrEqual(s.memoryBytes);
      if (s.pssBytes !== null) expect(s.pssBytes).toBeGreaterThan(1 << 20);
      expect(s.memoryLimitBytes).toBeGreaterThanOrEqual(SMALL.memoryMB * 1024 * 1024);
      // cpuUse's CPU figure is stats' alone: it only grows. Some thread of a running sandbox was
      // runnable for a while (the runtime's own, at least).
      const use = await driver.cpuUse(source);
      if (use !== null) {
        expect(use.cpuNs).toBeGreaterThanOrEqual(s.cpuNs);
        for (const ns of use.runnableNs.values()) expect(ns).toBeGreaterThanOrEqual(0);
        expect(Math.max(0, ...use.runnableNs.values())).toBeGreaterThan(0);
        const cpuOnly = await driver.cpuUse(source, { threads: false });
        expect(cpuOnly!.cpuNs).toBeGreaterThanOrEqual(use.cpuNs);
        expect(cpuOnly!.runnableNs.size).toBe(0);
      }
    });

    it('a failed checkpoint (out of disk) leaves the sandbox running', async () => {
      const tiny = join(scratch, 'tiny');
      await mkdir(tiny, { recursive: true });
      const { execFileSync } = await import('node:child_process');
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'aenv-test-tiny', tiny]);
      try {
        await expect(
          driver.checkpoint(source, { dir: join(tiny, 'cap'), leaveRunning: true }),
        ).rejects.toBeInstanceOf(CheckpointError);
        expect(await readdir(tiny)).toEqual([]);
      } finally {
        // Lazy: runsc keeps the failed image file open in the sandbox until it exits.
        execFileSync('umount', ['--lazy', tiny]);
      }
      expect(await driver.status(source)).toBe('running');
      expect(await client(source).health()).toBe(204);
    });

    it('kill stops the sandbox at once and releases processes, mounts, cgroups and runtime state', async () => {
      const id = source.id;
      const envd = client(source);
      expect(processesMentioning(id).length).toBeGreaterThan(0);
      await kill(source);
      expect(await driver.status(source)).toBe('stopped');
      await expect(envd.health(500)).rejects.toThrow();
      await driver.released(id);
      expect(driver.releasing().map((r) => r.id)).not.toContain(id);
      if (runscRoot) expect(runscIds(runscRoot)).not.toContain(id);
      expect(processesMentioning(id)).toEqual([]);
      expect(mountsMentioning(id)).toEqual([]);
      for (const ctrl of ['memory', 'cpu', 'pids']) {
        await expect(stat(`/sys/fs/cgroup/${ctrl}/aenv/${id}`)).rejects.toThrow();
      }
      await driver.kill(source); // idempotent
    });

    it('a sandbox whose processes die is reported failed and released', async () => {
      const h = await restore(template.capture.dir);
      const { execFileSync } = await import('node:child_process');
      const pids = processesMentioning(h.id)
        .map((l) => Number(l.trim().split(/\s+/)[0]))
        .filter((n) => n > 0);
      expect(pids.length).toBeGreaterThan(0);
      execFileSync('kill', ['-9', ...pids.map(String)]);
      await eventually(() => expect(exits.find((e) => e.id === h.id)?.reason).toMatch(/exited/));
      expect(await driver.status(h)).toBe('stopped');
      await driver.released(h.id);
      if (runscRoot) expect(runscIds(runscRoot)).not.toContain(h.id);
      expect(mountsMentioning(h.id)).toEqual([]);
      nets.get(h.id)?.destroy();
    });

    describe('bad inputs leave nothing behind', () => {
      const bundles = () => readdir(`${RUNTIME_DIR}/sandboxes`).catch(() => [] as string[]);
      const before = async () => ({ ids: runscRoot ? runscIds(runscRoot) : [], bundles: await bundles() });

      it('restore of a missing capture', async () => {
        const b = await before();
        await expect(restore(join(scratch, 'does-not-exist'))).rejects.toBeInstanceOf(CaptureInvalidError);
        expect(runscRoot ? runscIds(runscRoot) : []).toEqual(b.ids);
      });

      it('restore of a truncated capture', async () => {
        const dir = join(scratch, 'truncated');
        await cp(forkCapture, dir, { recursive: true });
        const files = (await readdir(dir)).filter((f) => f !== 'capture.json');
        await truncate(join(dir, files[0]!), 100);
        await expect(restore(dir)).rejects.toBeInstanceOf(CaptureInvalidError);
      });

      it('restore of a corrupt capture (same size, garbage content)', async () => {
        const b = await before();
        const dir = join(scratch, 'corrupt');
        await cp(forkCapture, dir, { recursive: true });
        for (const f of (await readdir(dir)).filter((n) => n !== 'capture.json')) {
          const fh = await open(join(dir, f), 'r+');
          const size = (await fh.stat()).size;
          await fh.write(Buffer.alloc(Math.min(size, 4096), 0xa5), 0, Math.min(size, 4096), 0);
          await fh.close();
        }
        const err = await restore(dir).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RuntimeError);
        expect(runscRoot ? runscIds(runscRoot) : []).toEqual(b.ids);
        expect(await bundles()).toEqual(b.bundles);
      });

      it('bad resources and missing layers', async () => {
        const b = await before();
        const net = createTestNet();
        try {
          const base = {
            layers: template.layers,
            mounts: template.mounts,
            init: template.init,
            net,
            envdPort: 49983,
          };
          await expect(
            driver.start({ ...base, resources: { ...SMALL, memoryMB: 0 } }),
          ).rejects.toBeInstanceOf(InvalidRequestError);
          await expect(
            driver.start({ ...base, layers: ['/nonexistent'], resources: SMALL }),
          ).rejects.toBeInstanceOf(InvalidRequestError);
        } finally {
          net.destroy();
        }
        expect(await bundles()).toEqual(b.bundles);
        expect(runscRoot ? runscIds(runscRoot) : []).toEqual(b.ids);
      });
    });
  });
}

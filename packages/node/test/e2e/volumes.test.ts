import {
  AuthenticationError,
  Sandbox,
  Template,
  Volume,
  VolumeNotFoundError,
  VolumePathNotFoundError,
} from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, SNAPSHOT_STORE, URL_BASE, useTestServer } from '@agentenv/test-support/server';
import { PosixRepository } from '@agentenv/snapshot';

// A 1 MiB quota, so the quota test stays small.
useTestServer({ AENV_VOLUME_QUOTA_MB: '1' });
const run = Date.now().toString(36);
const created: string[] = [];
beforeAll(async () => {
  // The first create waits for the base template (built once per machine).
  const warm = await Sandbox.create({ timeoutMs: 60_000 });
  await warm.kill();
});
afterAll(async () => {
  for (const id of created) await Volume.destroy(id).catch(() => undefined);
});

const newVolume = async (name: string) => {
  const v = await Volume.create(`${name}-${run}`);
  created.push(v.volumeId);
  return v;
};

describe('volumes through the E2B SDK', () => {
  it('are shared read-write by two sandboxes and outlive them', async () => {
    const vol = await newVolume('shared');
    expect((await Volume.list()).map((v) => v.name)).toContain(vol.name);
    const info = await Volume.getInfo(vol.volumeId);
    expect(info).toMatchObject({ volumeId: vol.volumeId, name: vol.name, token: vol.token });

    // Written through the content API with no sandbox running.
    await vol.makeDir('/in');
    const w = await vol.writeFile('/in/seed.txt', 'from the content api');
    expect(w).toMatchObject({ name: 'seed.txt', path: '/in/seed.txt', size: 20 });

    const mounts = { '/mnt/shared': vol };
    const [a, b] = await Promise.all([
      Sandbox.create({ volumeMounts: mounts }),
      Sandbox.create({ volumeMounts: { '/data': vol.name } }),
    ]);
    try {
      expect((await Sandbox.getInfo(a.sandboxId)).volumeMounts).toEqual([
        { name: vol.name, path: '/mnt/shared' },
      ]);
      expect((await a.commands.run('cat /mnt/shared/in/seed.txt')).stdout).toBe('from the content api');
      // A write in one sandbox, as its default user, is seen by the other at its own path.
      await a.commands.run('echo "written in a" > /mnt/shared/from-a.txt');
      expect((await b.commands.run('cat /data/from-a.txt')).stdout).toBe('written in a\n');
      await b.files.write('/data/in/from-b.txt', 'written in b');
      expect((await a.commands.run('cat /mnt/shared/in/from-b.txt')).stdout).toBe('written in b');
    } finally {
      await Promise.all([a.kill(), b.kill()]);
    }

    // Read back through the content API once both sandboxes are gone.
    const again = await Volume.connect(vol.volumeId);
    expect(await again.readFile('/from-a.txt')).toBe('written in a\n');
    expect(await again.readFile('/in/from-b.txt')).toBe('written in b');
    expect((await again.list('/in')).map((e) => e.name).sort()).toEqual(['from-b.txt', 'seed.txt']);
    expect(await again.exists('/in/seed.txt')).toBe(true);
    const meta = await again.updateMetadata('/in/seed.txt', { mode: 0o600 });
    expect(meta.mode).toBe(0o600);
    expect((await again.getInfo('/in')).type).toBe('directory');
    await again.remove('/in/seed.txt');
    expect(await again.exists('/in/seed.txt')).toBe(false);
    await expect(again.readFile('/in/seed.txt')).rejects.toBeInstanceOf(VolumePathNotFoundError);

    expect(await Volume.destroy(vol.volumeId)).toBe(true);
    expect(await Volume.destroy(vol.volumeId)).toBe(false);
    await expect(Volume.getInfo(vol.volumeId)).rejects.toBeInstanceOf(VolumeNotFoundError);
  });

  it('stay mounted across pause/resume and in forked children', async () => {
    const vol = await newVolume('kept');
    const t0 = performance.now();
    const sbx = await Sandbox.create({ volumeMounts: { '/vol': vol }, timeoutMs: 300_000 });
    console.log(`create of base with a volume: ${Math.round(performance.now() - t0)} ms`);
    const kids: Sandbox[] = [];
    try {
      await sbx.commands.run('echo before > /vol/before.txt');
      expect(await sbx.pause()).toBe(true);
      // Written while the sandbox is paused: the resumed one sees the volume as it is now.
      await vol.writeFile('/while-paused.txt', 'paused');
      const resumed = await Sandbox.connect(sbx.sandboxId);
      expect((await resumed.commands.run('cat /vol/before.txt /vol/while-paused.txt')).stdout).toBe(
        'before\npaused',
      );
      expect((await Sandbox.getInfo(sbx.sandboxId)).volumeMounts).toEqual([{ name: vol.name, path: '/vol' }]);

      const children = await resumed.fork({ count: 1 } as never);
      kids.push(...children.filter((c): c is Sandbox => c instanceof Sandbox));
      expect(kids).toHaveLength(1);
      const child = kids[0]!;
      expect((await Sandbox.getInfo(child.sandboxId)).volumeMounts).toEqual([
        { name: vol.name, path: '/vol' },
      ]);
      await child.commands.run('echo child > /vol/child.txt');
      expect((await resumed.commands.run('cat /vol/child.txt')).stdout).toBe('child\n');
      expect(await vol.readFile('/child.txt')).toBe('child\n');
    } finally {
      await Promise.all([sbx.kill(), ...kids.map((k) => k.kill())]);
    }
  });

  it('come back after a filesystem-only pause and a reboot, without being stored as the sandbox’s files', async () => {
    const vol = await newVolume('cold');
    const sbx = await Sandbox.create({ volumeMounts: { '/home/user/v*l': vol }, timeoutMs: 300_000 });
    const id = sbx.sandboxId;
    const repo = new PosixRepository({ path: SNAPSHOT_STORE, create: false });
    await repo.open();
    try {
      // 512 KiB that does not compress, in the volume: a layer that took it in would show it.
      await sbx.commands.run(
        "head -c 524288 /dev/urandom > '/home/user/v*l/noise' && echo mine > /home/user/own.txt",
      );
      await sbx.pause({ keepMemory: false });
      const stored = await eventually(
        async () => {
          const r = (await repo.listRecords({ labels: { sandboxId: id, kind: 'pause' } }, { limit: 1 }))
            .records[0];
          expect(r).toBeDefined();
          return r!.bytesTotal;
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      );
      expect(stored).toBeLessThan(256 * 1024);
      await vol.writeFile('/while-paused.txt', 'paused');
      const show =
        "cat /home/user/own.txt '/home/user/v*l/while-paused.txt'; echo; stat -c %s '/home/user/v*l/noise'";
      const cold = await Sandbox.connect(id);
      expect((await cold.commands.run(show)).stdout).toBe('mine\npaused\n524288\n');
      await cold.commands.run("rm '/home/user/v*l/while-paused.txt'");
      expect(await vol.exists('/while-paused.txt')).toBe(false);

      await cold.pause();
      await vol.writeFile('/while-paused.txt', 'rebooted');
      const rebooted = await Sandbox.connect(id, { onResume: 'reboot' });
      expect((await rebooted.commands.run(show)).stdout).toBe('mine\nrebooted\n524288\n');
    } finally {
      await repo.close();
      await sbx.kill();
    }
  });

  it('mount into sandboxes restored from a built template and from a snapshot', async () => {
    const vol = await newVolume('restored');
    await vol.writeFile('/seed.txt', 'seed');
    const alias = `vol-tpl-${run}`;
    await Template.build(Template().fromTemplate('base').runCmd('echo built > /home/user/built.txt'), alias);
    const sandboxes: Sandbox[] = [];
    try {
      const t0 = performance.now();
      const sbx = await Sandbox.create(alias, { volumeMounts: { '/vol': vol } });
      console.log(`create of ${alias} with a volume: ${Math.round(performance.now() - t0)} ms`);
      sandboxes.push(sbx);
      expect((await sbx.commands.run('cat /home/user/built.txt /vol/seed.txt')).stdout).toBe('built\nseed');
      await sbx.commands.run('echo from-template > /vol/tpl.txt');
      expect(await vol.readFile('/tpl.txt')).toBe('from-template\n');
      // The sandbox's mount point holds its own volume only, and only root enters it.
      expect((await sbx.commands.run('sudo ls /.aenv-volumes')).stdout).toBe(`${vol.name}\n`);
      expect((await sbx.commands.run('ls /.aenv-volumes 2>&1 || true')).stdout).toContain(
        'Permission denied',
      );

      // A snapshot of a sandbox without volumes, and a sandbox from it with one.
      const plain = await Sandbox.create(alias);
      sandboxes.push(plain);
      await plain.commands.run('echo in-snapshot > /home/user/snap.txt');
      const snap = await plain.createSnapshot();
      const fromSnap = await Sandbox.create(snap.snapshotId, { volumeMounts: { '/data': vol.name } });
      sandboxes.push(fromSnap);
      expect((await Sandbox.getInfo(fromSnap.sandboxId)).volumeMounts).toEqual([
        { name: vol.name, path: '/data' },
      ]);
      expect((await fromSnap.commands.run('cat /home/user/snap.txt /data/tpl.txt')).stdout).toBe(
        'in-snapshot\nfrom-template\n',
      );
      await fromSnap.files.write('/data/snap.txt', 'from-snapshot');
      expect((await sbx.commands.run('cat /vol/snap.txt')).stdout).toBe('from-snapshot');
      await api('DELETE', `/templates/${snap.snapshotId}`);
    } finally {
      await Promise.all(sandboxes.map((s) => s.kill()));
      await api('DELETE', `/templates/${alias}`);
    }
  });

  it('refuse bad input with clear errors', async () => {
    const vol = await newVolume('bad');
    // Names.
    const dup = await api('POST', '/volumes', { name: vol.name });
    expect(dup.status).toBe(409);
    const badName = await api('POST', '/volumes', { name: '../etc' });
    expect(badName.status).toBe(400);
    expect(badName.json.message).toContain('invalid volume name');

    // Mounts: unknown volume, relative path, system trees.
    const create = (volumeMounts: unknown) =>
      api('POST', '/v2/sandboxes', { templateID: 'base', volumeMounts });
    const unknown = await create([{ name: `missing-${run}`, path: '/data' }]);
    expect(unknown.status).toBe(400);
    expect(unknown.json.message).toBe(`volume missing-${run} not found`);
    for (const path of ['data', '/proc', '/sys/x', '/dev/shm']) {
      const r = await create([{ name: vol.name, path }]);
      expect(r.status, path).toBe(400);
      expect(r.json.message).toContain(path);
    }

    // Content API: '..', a wrong token, another volume's token, the quota.
    const dotdot = await fetch(`${URL_BASE}/volumecontent/${vol.volumeId}/file?path=/../volume.json`, {
      headers: { authorization: `Bearer ${vol.token}` },
    });
    expect(dotdot.status).toBe(400);
    expect(((await dotdot.json()) as { message: string }).message).toContain("'..'");
    const other = await newVolume('other');
    for (const token of ['wrong', other.token]) {
      const r = await fetch(`${URL_BASE}/volumecontent/${vol.volumeId}/dir?path=/`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(r.status).toBe(401);
    }
    const forged = new Volume(vol.volumeId, vol.name, 'forged-token');
    await expect(forged.list('/')).rejects.toBeInstanceOf(AuthenticationError);
    await expect(vol.writeFile('/big', new Uint8Array(1024 * 1024 + 1))).rejects.toThrow(
      /would exceed its quota of 1 MiB/,
    );
    expect(await vol.exists('/big')).toBe(false);
    await vol.writeFile('/fits', new Uint8Array(1024));
  });
});

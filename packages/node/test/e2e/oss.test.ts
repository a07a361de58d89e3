/**
 * The node with its snapshot repository on S3 (`snapshot.repository_backend = "oss"`), against
 * s3rver, a real S3 implementation started on 127.0.0.1: the region check at startup, snapshots
 * and pauses through S3, and what happens when S3 goes away.
 */
import { Sandbox } from 'e2b';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeS3RepositoryConfig, startS3, type S3Server } from '@agentenv/test-support/snapshot';
import {
  api,
  cleanSandboxes,
  removeState,
  startServer,
  useSdkEnv,
  type TestServer,
} from '@agentenv/test-support/server';

const dir = mkdtempSync(path.join(tmpdir(), 'aenv-oss-'));

const configFile = (name: string, s3: S3Server, withRegion: boolean) =>
  writeS3RepositoryConfig(path.join(dir, name), {
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    prefix: 'node-test',
    ...(withRegion ? {} : { region: false }),
  });

describe('a node with an S3 snapshot repository', () => {
  let s3: S3Server | undefined;
  let server: TestServer | undefined;

  beforeAll(async () => {
    s3 = await startS3();
    removeState();
  });
  afterAll(async () => {
    await cleanSandboxes().catch(() => undefined);
    await server?.stop();
    removeState();
    await s3?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses to start without a region, naming it', async () => {
    await expect(
      startServer({ AENV_CONFIG_PATH: configFile('no-region.toml', s3!, false), AENV_POOL_SIZE: '0' }),
    ).rejects.toThrow(/region/);
  });

  it('snapshots, starts from snapshots and pauses through S3; S3 down keeps sandboxes running', async () => {
    server = await startServer({ AENV_CONFIG_PATH: configFile('oss.toml', s3!, true), AENV_POOL_SIZE: '0' });
    useSdkEnv();
    const sbx = await Sandbox.create();
    await sbx.files.write('/home/user/where', 'in-s3');
    const snap = await sbx.createSnapshot();
    const child = await Sandbox.create(snap.snapshotId);
    expect(await child.files.read('/home/user/where')).toBe('in-s3');
    await child.kill();

    await sbx.pause();
    const resumed = await Sandbox.connect(sbx.sandboxId);
    expect(await resumed.files.read('/home/user/where')).toBe('in-s3');
    expect((await api('DELETE', `/templates/${snap.snapshotId}`)).status).toBe(204);

    await s3!.close();
    s3 = undefined;
    // With S3 gone a snapshot asked to wait for the repository fails, and the sandbox runs on.
    const failed = await api('POST', `/sandboxes/${sbx.sandboxId}/snapshots?wait=stored`, {});
    expect(failed.status).toBe(503);
    expect((failed.json as { message: string }).message).toMatch(/snapshot repository/);
    expect((await resumed.commands.run('echo still running')).stdout).toBe('still running\n');
    // One not asked to wait is kept on this node, which starts sandboxes from it.
    const local = await api('POST', `/sandboxes/${sbx.sandboxId}/snapshots`, {});
    expect(local.status).toBe(201);
    expect(local.json.stored).toBe(false);
    const fromLocal = await Sandbox.create(local.json.snapshotID as string);
    expect(await fromLocal.files.read('/home/user/where')).toBe('in-s3');
    await fromLocal.kill();
    expect((await api('GET', `/snapshots/${local.json.snapshotID as string}`)).json.stored).toBe(false);
    expect((await api('DELETE', `/templates/${local.json.snapshotID as string}`)).status).toBe(204);

    // With S3 gone a pause stays on this node, and resumes from there.
    await resumed.pause();
    const back = await Sandbox.connect(sbx.sandboxId);
    expect(await back.files.read('/home/user/where')).toBe('in-s3');
    await back.kill();
  });
});

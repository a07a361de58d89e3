/**
 * A pause answers once the sandbox is captured; its upload into the S3 repository (s3rver behind
 * a TCP relay the test can stall) runs afterwards. A node SIGKILLed while that upload hangs
 * still resumes the sandbox, with its memory, after the restart, and finishes the upload.
 */
import { Sandbox } from 'e2b';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import {
  writeS3RepositoryConfig,
  startS3,
  StallingRelay,
  type S3Server,
} from '@agentenv/test-support/snapshot';
import {
  api,
  cleanSandboxes,
  localCaptures,
  removeState,
  startServer,
  useSdkEnv,
  type TestServer,
} from '@agentenv/test-support/server';

/** The relay's port: helper 25's range (the node reaches S3 only through it). */
const RELAY_PORT = 22501;

const dir = mkdtempSync(path.join(tmpdir(), 'aenv-pause-upload-'));

const configFile = (s3: S3Server) =>
  writeS3RepositoryConfig(path.join(dir, 'oss.toml'), {
    endpoint: `http://127.0.0.1:${RELAY_PORT}`,
    bucket: s3.bucket,
    prefix: 'pause-upload-test',
  });

describe('a pause whose repository upload is cut short by a crash', () => {
  let s3: S3Server | undefined;
  let relay: StallingRelay | undefined;
  let server: TestServer | undefined;
  const env = () => ({ AENV_CONFIG_PATH: configFile(s3!), AENV_POOL_SIZE: '0' });

  beforeAll(async () => {
    s3 = await startS3();
    relay = new StallingRelay(Number(new URL(s3.endpoint).port));
    await relay.listen(RELAY_PORT);
    removeState();
    useSdkEnv();
  });
  afterAll(async () => {
    relay?.flow();
    await cleanSandboxes().catch(() => undefined);
    await server?.stop();
    removeState();
    await relay?.close();
    await s3?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers while S3 hangs, survives SIGKILL, and resumes with its memory after the restart', async () => {
    server = await startServer(env());
    const sbx = await Sandbox.create();
    await sbx.commands.run(
      "python3 -c \"import time\nn=0\nwhile True:\n  n+=1\n  open('/tmp/n','w').write(str(n))\n  time.sleep(0.1)\"",
      { background: true, timeoutMs: 0 },
    );
    const counted = async (s: Sandbox) =>
      Number((await s.commands.run('cat /tmp/n 2>/dev/null || echo 0')).stdout);
    await eventually(async () => expect(await counted(sbx)).toBeGreaterThan(1));

    relay!.stall();
    const paused = await api('POST', `/sandboxes/${sbx.sandboxId}/pause`);
    expect(paused.status).toBe(204);
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).json.state).toBe('paused');
    // The upload has started and hangs in S3.
    await eventually(() => expect(relay!.held).toBeGreaterThan(0));
    expect(localCaptures(sbx.sandboxId)).toHaveLength(1);

    await server.stop('SIGKILL');
    relay!.flow();
    server = await startServer(env());
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).json.state).toBe('paused');
    // The restarted node uploads the pause again; the local capture goes once S3 holds it.
    await eventually(() => expect(localCaptures(sbx.sandboxId)).toEqual([]), { timeoutMs: 60_000 });

    const again = await Sandbox.connect(sbx.sandboxId);
    const before = Number(await again.files.read('/tmp/n'));
    expect(before).toBeGreaterThan(1);
    // The process, and so its memory, lived on across the pause, the crash and the restart.
    await eventually(async () => expect(await counted(again)).toBeGreaterThan(before));
    await again.kill();
  });
});

/**
 * A pause answers once the sandbox is captured; its upload into the S3 repository (s3rver behind
 * a TCP relay the test can stall) runs afterwards. A node SIGKILLed while that upload hangs
 * still resumes the sandbox, with its memory, after the restart, and finishes the upload.
 */
import { Sandbox } from 'e2b';
import { describe, expect, it } from 'vitest';
import { eventually } from '@agentenv/test-support';
import { api, localCaptures, startServer, URL_BASE, useS3BehindRelay } from '@agentenv/test-support/server';

/** The relay's port: helper 25's range (the node reaches S3 only through it). */
const RELAY_PORT = 22501;

describe('a pause whose repository upload is cut short by a crash', () => {
  const ctx = useS3BehindRelay({ relayPort: RELAY_PORT, prefix: 'pause-upload-test' });

  it('answers while S3 hangs, survives SIGKILL, and resumes with its memory after the restart', async () => {
    ctx.server = await startServer(ctx.env());
    const sbx = await Sandbox.create();
    await sbx.commands.run(
      "python3 -c \"import time\nn=0\nwhile True:\n  n+=1\n  open('/tmp/n','w').write(str(n))\n  time.sleep(0.1)\"",
      { background: true, timeoutMs: 0 },
    );
    const counted = async (s: Sandbox) =>
      Number((await s.commands.run('cat /tmp/n 2>/dev/null || echo 0')).stdout);
    await eventually(async () => expect(await counted(sbx)).toBeGreaterThan(1));

    ctx.relay.stall();
    const paused = await api('POST', `/sandboxes/${sbx.sandboxId}/pause`);
    expect(paused.status).toBe(204);
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).json.state).toBe('paused');
    // The upload has started and hangs in S3.
    await eventually(() => expect(ctx.relay.held).toBeGreaterThan(0));
    expect(localCaptures(sbx.sandboxId)).toHaveLength(1);

    await ctx.server.stop('SIGKILL');
    ctx.relay.flow();
    ctx.server = await startServer(ctx.env());
    expect((await api('GET', `/sandboxes/${sbx.sandboxId}`)).json.state).toBe('paused');
    // The restarted node uploads the pause again; the local capture goes once S3 holds it.
    await eventually(() => expect(localCaptures(sbx.sandboxId)).toEqual([]), { timeoutMs: 60_000 });
    // How long the pause was on the node's disk only is a lifecycle stage (the cluster agent
    // heartbeats as it ends).
    await eventually(async () =>
      expect(await (await fetch(`${URL_BASE}/metrics`)).text()).toMatch(
        /aenv_lifecycle_stage_duration_seconds_count\{stage="pause-upload"\} 1\b/,
      ),
    );

    const again = await Sandbox.connect(sbx.sandboxId);
    const before = Number(await again.files.read('/tmp/n'));
    expect(before).toBeGreaterThan(1);
    // The process, and so its memory, lived on across the pause, the crash and the restart.
    await eventually(async () => expect(await counted(again)).toBeGreaterThan(before));
    await again.kill();
  });
});

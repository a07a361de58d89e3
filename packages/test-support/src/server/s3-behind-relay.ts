import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { startS3, StallingRelay, writeS3RepositoryConfig, type S3Server } from '../snapshot/index.js';
import { cleanSandboxes, removeState, useSdkEnv, type TestServer } from './server-fixture.js';

export interface S3BehindRelay {
  readonly s3: S3Server;
  readonly relay: StallingRelay;
  /** The node the test started (and restarted), stopped after the file's tests. */
  server?: TestServer;
  /** startServer() environment: the S3 repository through the relay, no warm pool. */
  env(): Record<string, string>;
}

/**
 * A test file whose node stores into S3 (s3rver) that it reaches only through a relay on
 * `relayPort`, which the test can stall to hold an upload where it is. Both start before the
 * file's tests, with fresh node state; afterwards the relay flows again first, so that the node's
 * stop is not stuck behind a held upload, and everything is removed.
 */
export function useS3BehindRelay(o: { relayPort: number; prefix: string }): S3BehindRelay {
  const dir = mkdtempSync(path.join(tmpdir(), `aenv-${o.prefix}-`));
  let s3: S3Server | undefined;
  let relay: StallingRelay | undefined;
  const ctx: S3BehindRelay = {
    get s3() {
      if (!s3) throw new Error('S3 starts before the tests');
      return s3;
    },
    get relay() {
      if (!relay) throw new Error('the relay starts before the tests');
      return relay;
    },
    env: () => ({
      AENV_CONFIG_PATH: writeS3RepositoryConfig(path.join(dir, 'oss.toml'), {
        endpoint: `http://127.0.0.1:${o.relayPort}`,
        bucket: ctx.s3.bucket,
        prefix: o.prefix,
      }),
      AENV_POOL_SIZE: '0',
    }),
  };
  beforeAll(async () => {
    s3 = await startS3();
    relay = new StallingRelay(Number(new URL(s3.endpoint).port));
    await relay.listen(o.relayPort);
    removeState();
    useSdkEnv();
  });
  afterAll(async () => {
    relay?.flow();
    await cleanSandboxes().catch(() => undefined);
    await ctx.server?.stop();
    removeState();
    await relay?.close();
    await s3?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return ctx;
}

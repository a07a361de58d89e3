import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sandboxRecord } from '@agentenv/test-support/fakes';
import { randomPages, scratchDir, writeCapture } from '@agentenv/test-support/snapshot';
import { errorBody } from '@agentenv/common';
import { RepositoryPauses } from '../../src/orchestrator/persistence/repository-pauses.js';
import { PauseSealer } from '../../src/orchestrator/persistence/stored-pause.js';
import { createRepository, RuntimeCache, SnapshotStore } from '@agentenv/snapshot';

/** Two nodes' RepositoryPauses over one posix repository, each with its own runtime cache. */
describe('pauses in the repository', () => {
  let work: { dir: string; remove: () => Promise<void> };
  let a: RepositoryPauses;
  let b: RepositoryPauses;
  const claims = () => readdir(join(work.dir, 'repo', 'claims'));
  const sealer = new PauseSealer('e2b_the-installation-api-key');

  beforeAll(async () => {
    work = await scratchDir('pause-claims');
    const repository = createRepository({ backend: 'posix_fs', path: join(work.dir, 'repo') });
    await repository.open();
    const store = new SnapshotStore({ repository });
    const node = (name: string, secret: string) =>
      new RepositoryPauses(
        store,
        new RuntimeCache({ dir: join(work.dir, name), capacityBytes: 2 ** 26, store }),
        secret,
      );
    a = node('cache-a', 'secret-a');
    b = node('cache-b', 'secret-b');
  });
  afterAll(() => work.remove());

  async function capture(name: string): Promise<string> {
    const dir = join(work.dir, 'captures', name);
    await writeCapture(dir, { 'pages.img': randomPages(4) });
    return dir;
  }

  it('a stored pause is its node’s until released; then the first to claim it has it', async () => {
    const rec = sandboxRecord({ sandboxId: 'claimed1', state: 'paused' });
    const pauseId = await a.save(await capture('c1'), sealer.seal(rec));
    expect((await b.findPaused('claimed1'))?.pauseId).toBe(pauseId);
    expect(await b.claim(pauseId)).toBe(false);
    expect(await a.claim(pauseId)).toBe(true);
    await a.release(pauseId);
    expect(await b.claim(pauseId)).toBe(true);
    expect(await a.claim(pauseId)).toBe(false);
    // A drops what it no longer holds only from its own cache: B runs the sandbox from it.
    await a.drop(pauseId);
    expect((await b.findPaused('claimed1'))?.pauseId).toBe(pauseId);
    await b.drop(pauseId);
    expect(await b.findPaused('claimed1')).toBeUndefined();
    expect(await claims()).toEqual([]);
  });

  it('a save that fails leaves no claim behind', async () => {
    const rec = sandboxRecord({ sandboxId: 'failed1', state: 'paused' });
    await expect(a.save(join(work.dir, 'captures', 'missing'), sealer.seal(rec))).rejects.toThrow();
    expect(await claims()).toEqual([]);
    expect(await a.findPaused('failed1')).toBeUndefined();
  });

  it('keeps the env vars and tokens out of what it stores; a node with the key reads them back', async () => {
    const secrets = {
      envVars: { OPENAI_API_KEY: 'sk-secret-value-0123456789', PLAIN: 'also-a-secret-4242' },
      envdAccessToken: 'envd-token-5a5a5a5a5a5a5a5a5a5a',
      trafficAccessToken: 'traffic-token-6b6b6b6b6b6b6b6b',
    };
    const metadata = { owner: 'visible-metadata-value' };
    const rec = sandboxRecord({ sandboxId: 'sealed1', state: 'paused', secure: true, metadata, ...secrets });
    const pauseId = await a.save(await capture('c3'), sealer.seal(rec));
    const stored = await everyFile(join(work.dir, 'repo'));
    // The scan sees the stored record: what is not secret is there in plain text.
    expect(stored.some((f) => f.bytes.includes(metadata.owner))).toBe(true);
    for (const value of [
      ...Object.values(secrets.envVars),
      secrets.envdAccessToken,
      secrets.trafficAccessToken,
    ])
      for (const { name, bytes } of stored) expect(bytes.includes(value), `${value} in ${name}`).toBe(false);

    const found = (await b.findPaused('sealed1'))!;
    expect(found.pauseId).toBe(pauseId);
    const { state: _s, ...kept } = rec;
    expect(sealer.open(found.pauseId, found.pause)).toEqual({ ...kept, state: 'paused', pauseId });
    const err = (() => {
      try {
        return new PauseSealer('e2b_another-installation').open(found.pauseId, found.pause);
      } catch (e) {
        return e;
      }
    })();
    expect(errorBody(err)).toMatchObject({ status: 409 });
    expect(errorBody(err).body.message).toMatch(/sealed with another key: .*same API key/);
  });
});

/** Every file under `dir` (blobs, records, claims), as text. */
async function everyFile(dir: string): Promise<{ name: string; bytes: string }[]> {
  const out: { name: string; bytes: string }[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const name = join(e.parentPath, e.name);
    out.push({ name, bytes: (await readFile(name)).toString('latin1') });
  }
  return out;
}

import { describe, expect, it } from 'vitest';
import { errorBody } from '@agentenv/common';
import { FakeNode, rejection as failure } from '@agentenv/test-support/fakes';

const SECRET_ENV = { OPENAI_API_KEY: 'sk-live-0123456789abcdef', DB_PASSWORD: 'hunter2-but-longer' };
const API_KEY = 'e2b_shared-by-the-cluster-0001';

/** A on a cluster's API key, a secure private sandbox with secret env vars, paused and uploaded. */
async function pausedWithSecrets(apiKey = API_KEY) {
  const a = new FakeNode({ apiKey });
  const rec = await a.create({ envVars: SECRET_ENV, secure: true, allowPublicTraffic: false });
  a.driver.write(rec.handle!.id, 'mem', 'a');
  await a.orchestrator.pause(rec.sandboxId);
  await a.orchestrator.backgroundIdle();
  return { a, rec, id: rec.sandboxId };
}

describe('pause secrets in the shared repository', () => {
  it('stores neither the env vars nor the tokens in plain text', async () => {
    const { a, rec } = await pausedWithSecrets();
    expect(rec.envdAccessToken).toBeDefined();
    expect(rec.trafficAccessToken).toBeDefined();
    expect(a.storage.pauses.size).toBe(1);
    const stored = JSON.stringify([...a.storage.pauses.values()].map((p) => p.pause));
    expect(stored).toContain(rec.sandboxId);
    for (const value of [...Object.values(SECRET_ENV), rec.envdAccessToken!, rec.trafficAccessToken!])
      expect(stored).not.toContain(value);
  });

  it('another node with the same API key takes it over with its env vars and tokens', async () => {
    const { a, rec, id } = await pausedWithSecrets();
    const b = a.peer();
    expect(await b.orchestrator.connect(id, 60)).toBe(true);
    const taken = b.orchestrator.get(id);
    expect(taken.envVars).toEqual(SECRET_ENV);
    expect(taken.envdAccessToken).toBe(rec.envdAccessToken);
    expect(taken.trafficAccessToken).toBe(rec.trafficAccessToken);
    expect(b.driver.state(taken.handle!.id)).toMatchObject({ mem: 'a' });
  });

  it('a node with another API key refuses it, saying why, and leaves it to the others', async () => {
    const { a, id } = await pausedWithSecrets();
    const stranger = a.peer({ apiKey: 'e2b_another-installation-02' });
    const err = await failure(stranger.orchestrator.connect(id, 60));
    expect(errorBody(err)).toMatchObject({ status: 409 });
    expect(errorBody(err).body.message).toMatch(/sealed with another key: .*same API key/);
    expect(stranger.orchestrator.find(id)).toBeUndefined();
    expect(await a.peer().orchestrator.connect(id, 60)).toBe(true);
  });
});

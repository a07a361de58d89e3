import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { environOf } from '@agentenv/test-support';
import { ProcessSpawner } from '../../src/util/spawner/client.js';
import { launchProcessesWith, runProcess } from '../../src/util/subprocess.js';

const KEY = 'e2b_' + 'feedface'.repeat(5);
const SECRET_ENV = {
  AENV_API_KEY: KEY,
  AWS_SECRET_ACCESS_KEY: 'aws-secret-value',
  AWS_SESSION_TOKEN: 'aws-session-value',
  REDIS_PASSWORD: 'redis-password-value',
};
const KEPT_ENV = { AENV_API_KEY_FILE: '/run/secrets/aenv-api-key', AENV_LOG_LEVEL: 'warn' };

/** What `env` printed, as a name → value map. */
const parsed = (stdout: string) =>
  Object.fromEntries(
    stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => [l.split('=')[0], l.slice(l.indexOf('=') + 1)]),
  );

function expectNoSecrets(vars: Record<string, string | undefined>): void {
  for (const name of Object.keys(SECRET_ENV)) expect(vars, name).not.toHaveProperty(name);
  for (const value of Object.values(SECRET_ENV)) expect(Object.values(vars)).not.toContain(value);
  expect(vars).toMatchObject(KEPT_ENV);
  expect(vars.PATH).toBe(process.env.PATH);
}

describe('child programs get no secrets', () => {
  const saved = { ...process.env };
  beforeAll(() => Object.assign(process.env, SECRET_ENV, KEPT_ENV));
  afterAll(() => {
    for (const name of Object.keys({ ...SECRET_ENV, ...KEPT_ENV })) delete process.env[name];
    Object.assign(process.env, saved);
  });
  afterEach(() => launchProcessesWith(undefined));

  it('from runProcess, with this environment or a given one', async () => {
    expectNoSecrets(parsed((await runProcess('/usr/bin/env', [])).stdout));
    const given = await runProcess('/usr/bin/env', [], { env: { ...process.env, LC_ALL: 'C' } });
    expectNoSecrets(parsed(given.stdout));
    expect(parsed(given.stdout).LC_ALL).toBe('C');
  });

  it('from the process spawner, and the spawner itself holds none', async () => {
    const spawner = new ProcessSpawner();
    try {
      launchProcessesWith(spawner);
      expectNoSecrets(parsed((await runProcess('/usr/bin/env', [])).stdout));
      expectNoSecrets(parsed((await runProcess('/usr/bin/env', [], { env: { ...process.env } })).stdout));
      // Sent as it is, the spawner still filters it.
      expectNoSecrets(parsed((await spawner.run('/usr/bin/env', [], { env: { ...process.env } })).stdout));
      const own = environOf(spawner.pid!).map((e) => [e.split('=')[0], e.slice(e.indexOf('=') + 1)]);
      expectNoSecrets(Object.fromEntries(own) as Record<string, string>);
    } finally {
      await spawner.close();
    }
  });
});

import { logOptions, REDACTED } from '@agentenv/common';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';

const SECRETS = ['e2b_0123456789abcdef', 'tok-envd', 'tok-traffic', 'Bearer abc.def', 'pw"with\\quote'];

/** Lines the real logger options write, for one logged object. */
function logged(obj: object, level: 'info' | 'error' = 'info'): string {
  const lines: string[] = [];
  const logger = pino(logOptions('test', 'debug'), { write: (line: string) => void lines.push(line) });
  logger[level](obj, 'logged');
  return lines.join('');
}

describe('log redaction', () => {
  it('hides headers and fields named like keys, tokens, secrets and passwords, at any depth', () => {
    const out = logged({
      apiKey: SECRETS[0],
      sandbox: { envdAccessToken: SECRETS[1], trafficAccessToken: SECRETS[2], id: 'sbx1' },
      req: {
        headers: {
          'x-api-key': SECRETS[0],
          authorization: SECRETS[3],
          'X-Access-Token': SECRETS[1],
          'E2B-Traffic-Access-Token': SECRETS[2],
          'user-agent': 'e2b-js',
        },
      },
      deep: { a: { b: { c: { d: { token: SECRETS[1], password: SECRETS[4], secret: SECRETS[2] } } } } },
      cookies: { cookie: [SECRETS[3], SECRETS[2]] },
    });
    for (const s of SECRETS) expect(out).not.toContain(JSON.stringify(s).slice(1, -1));
    expect(JSON.parse(out)).toMatchObject({
      msg: 'logged',
      apiKey: REDACTED,
      sandbox: { envdAccessToken: REDACTED, trafficAccessToken: REDACTED, id: 'sbx1' },
      req: { headers: { 'x-api-key': REDACTED, authorization: REDACTED, 'user-agent': 'e2b-js' } },
      deep: { a: { b: { c: { d: { token: REDACTED, password: REDACTED, secret: REDACTED } } } } },
      cookies: { cookie: REDACTED },
    });
  });

  it('hides them in a logged error too', () => {
    const err = Object.assign(new Error('request failed'), {
      accessToken: SECRETS[1],
      config: { headers: { 'X-API-Key': SECRETS[0] } },
    });
    const out = logged({ err }, 'error');
    for (const s of SECRETS) expect(out).not.toContain(s);
    expect(JSON.parse(out)).toMatchObject({
      err: {
        message: 'request failed',
        accessToken: REDACTED,
        config: { headers: { 'X-API-Key': REDACTED } },
      },
    });
  });

  it('leaves a value that only mentions a secret field alone, and the line valid JSON', () => {
    const text = 'the body was {"token":"x"} and key:"apiKey"';
    expect(JSON.parse(logged({ note: text, accessKeyId: 'AKIA1', tokens: 3 }))).toMatchObject({
      note: text,
      accessKeyId: 'AKIA1',
      tokens: 3,
    });
  });
});

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.js';
import { logFormat, processLogger } from '../../src/log.js';
import { REDACTED } from '../../src/secrets.js';

describe('logFormat', () => {
  it.each([
    [{}, true, 'pretty'],
    [{}, false, 'json'],
    [{ AENV_LOG_FORMAT: '' }, true, 'pretty'],
    [{ AENV_LOG_FORMAT: 'json' }, true, 'json'],
    [{ AENV_LOG_FORMAT: 'json' }, false, 'json'],
    [{ AENV_LOG_FORMAT: 'pretty' }, false, 'pretty'],
    [{ AENV_LOG_FORMAT: 'pretty' }, true, 'pretty'],
  ])('%o on a terminal: %s → %s', (env, isTTY, want) => {
    expect(logFormat(env, isTTY)).toBe(want);
  });

  it('refuses a format it does not know, naming the ones it does', () => {
    const err = (() => {
      try {
        logFormat({ AENV_LOG_FORMAT: 'yaml' }, true);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).kind).toBe('invalid');
    expect((err as Error).message).toMatch(/AENV_LOG_FORMAT.*pretty, json.*'yaml'/);
  });
});

const SECRETS = ['e2b_0123456789abcdef', 'tok-envd', 'Bearer abc.def'];

/** What a process logger writes to an output that is a terminal or not, for a few logged lines. */
function written(env: Record<string, string>, isTTY: boolean): string {
  const chunks: string[] = [];
  const out = Object.assign(
    new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk.toString());
        done();
      },
    }),
    { isTTY },
  );
  const logger = processLogger('aenv-test', 'info', { out, env });
  logger.info(
    { apiKey: SECRETS[0], sandbox: { id: 'sbx1', envdAccessToken: SECRETS[1] } },
    'sandbox created',
  );
  const err = Object.assign(new Error('request failed'), { headers: { authorization: SECRETS[2] } });
  logger.error({ err }, 'upstream failed');
  logger.debug({ token: SECRETS[1] }, 'below the level');
  return chunks.join('');
}

describe('processLogger', () => {
  it('writes a terminal one readable line per entry, with secrets redacted', () => {
    const out = written({}, true);
    for (const s of SECRETS) expect(out).not.toContain(s);
    const [created] = out.split('\n');
    expect(created).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(aenv-test\): sandbox created /);
    expect(created).toContain(`"apiKey":"${REDACTED}"`);
    expect(created).toContain(`"envdAccessToken":"${REDACTED}"`);
    expect(out).toMatch(/ERROR \(aenv-test\): upstream failed/);
    expect(out).toContain(`"authorization": "${REDACTED}"`);
    expect(out).not.toContain('below the level');
    expect(() => JSON.parse(created!)).toThrow();
  });

  it('writes JSON lines, redacted, when the output is no terminal or JSON is asked for', () => {
    for (const out of [written({}, false), written({ AENV_LOG_FORMAT: 'json' }, true)]) {
      for (const s of SECRETS) expect(out).not.toContain(s);
      const lines = out.trim().split('\n');
      expect(lines).toHaveLength(2);
      expect(JSON.parse(lines[0]!)).toMatchObject({
        name: 'aenv-test',
        msg: 'sandbox created',
        apiKey: REDACTED,
        sandbox: { id: 'sbx1', envdAccessToken: REDACTED },
      });
    }
  });

  it('pretty-prints a pipe when asked to', () => {
    const out = written({ AENV_LOG_FORMAT: 'pretty' }, false);
    for (const s of SECRETS) expect(out).not.toContain(s);
    expect(out).toMatch(/INFO \(aenv-test\): sandbox created/);
  });
});

import { describe, expect, it } from 'vitest';
import { parseSudoArgs } from '../../src/sudo/args.js';

const request = (argv: string[]) => {
  const r = parseSudoArgs(argv);
  if (r.kind !== 'request') throw new Error(`expected a request, got ${JSON.stringify(r)}`);
  return r.request;
};

describe('parseSudoArgs', () => {
  it('runs a command as root by default, options stopping at the first operand', () => {
    expect(request(['id', '-u'])).toEqual({ action: 'run', argv: ['id', '-u'] });
    expect(request(['-n', 'ls', '-n'])).toEqual({ action: 'run', argv: ['ls', '-n'] });
    expect(request(['--', '-weird', 'x'])).toEqual({ action: 'run', argv: ['-weird', 'x'] });
  });

  it('takes -u/-g/-D values attached, separate or long', () => {
    expect(request(['-u', 'nobody', 'id']).user).toBe('nobody');
    expect(request(['-unobody', 'id']).user).toBe('nobody');
    expect(request(['--user=#1000', 'id']).user).toBe('#1000');
    expect(request(['--user', 'bob', 'id']).user).toBe('bob');
    expect(request(['-g', 'adm', 'id']).group).toBe('adm');
    expect(request(['-D', '/tmp', 'pwd']).chdir).toBe('/tmp');
    expect(request(['-nEu', 'bob', 'id'])).toMatchObject({ user: 'bob', preserveEnv: true });
  });

  it('parses environment options and VAR=value assignments', () => {
    expect(request(['-E', 'env']).preserveEnv).toBe(true);
    expect(request(['--preserve-env', 'env']).preserveEnv).toBe(true);
    expect(request(['--preserve-env=A,B', '--preserve-env=C', 'env']).preserveEnv).toEqual(['A', 'B', 'C']);
    expect(request(['-H', 'A=1', 'B=x=y', 'env', 'C=2'])).toEqual({
      action: 'run',
      argv: ['env', 'C=2'],
      setHome: true,
      assignments: { A: '1', B: 'x=y' },
    });
  });

  it('parses shells, listing and validation', () => {
    expect(request(['-i'])).toEqual({ action: 'run', argv: [], login: true });
    expect(request(['-s', 'echo', 'hi'])).toEqual({ action: 'run', argv: ['echo', 'hi'], shell: true });
    expect(request(['-l'])).toEqual({ action: 'list', argv: [] });
    expect(request(['-l', '-U', 'bob'])).toEqual({ action: 'list', argv: [], listUser: 'bob' });
    expect(request(['-v'])).toEqual({ action: 'validate', argv: [] });
    expect(request(['-k', 'true'])).toEqual({ action: 'run', argv: ['true'] });
  });

  it('accepts the options that do nothing here', () => {
    expect(request(['-A', '-B', '-N', '-P', '-S', '-p', 'pw:', '-C', '3', 'true'])).toEqual({
      action: 'run',
      argv: ['true'],
    });
  });

  it('handles -h, -V, -k and -K alone', () => {
    expect(parseSudoArgs(['-h'])).toEqual({ kind: 'help' });
    expect(parseSudoArgs(['--help'])).toEqual({ kind: 'help' });
    expect(parseSudoArgs(['-V'])).toEqual({ kind: 'version' });
    expect(parseSudoArgs(['-k'])).toEqual({ kind: 'noop' });
    expect(parseSudoArgs(['-K'])).toEqual({ kind: 'noop' });
  });

  it('reports errors the way sudo does', () => {
    expect(parseSudoArgs([])).toEqual({ kind: 'usage' });
    expect(parseSudoArgs(['A=1'])).toEqual({ kind: 'usage' });
    expect(parseSudoArgs(['-z', 'x'])).toEqual({ kind: 'usage', message: "invalid option -- 'z'" });
    expect(parseSudoArgs(['--frob'])).toEqual({ kind: 'usage', message: "unrecognized option '--frob'" });
    expect(parseSudoArgs(['-u'])).toEqual({ kind: 'usage', message: "option requires an argument -- 'u'" });
    expect(parseSudoArgs(['--user'])).toEqual({
      kind: 'usage',
      message: "option '--user' requires an argument",
    });
    expect(parseSudoArgs(['--login=x'])).toEqual({
      kind: 'usage',
      message: "option '--login' doesn't allow an argument",
    });
    expect(parseSudoArgs(['-i', '-s'])).toMatchObject({
      message: 'you may not specify both the -i and -s options',
    });
    expect(parseSudoArgs(['-iE'])).toMatchObject({
      message: 'you may not specify both the -i and -E options',
    });
    expect(parseSudoArgs(['-U', 'bob', 'id'])).toMatchObject({ kind: 'usage' });
    expect(parseSudoArgs(['-K', 'id'])).toMatchObject({ kind: 'usage' });
  });

  it('refuses options it does not implement, without the usage text', () => {
    expect(parseSudoArgs(['-e', 'f'])).toMatchObject({
      kind: 'error',
      message: expect.stringMatching(/sudoedit/),
    });
    expect(parseSudoArgs(['-b', 'sleep', '1'])).toMatchObject({ kind: 'error' });
    expect(parseSudoArgs(['-T', '5', 'true'])).toMatchObject({ kind: 'error' });
  });
});

import { describe, expect, it } from 'vitest';
import { complete, specOf } from '../../src/completion/complete.js';
import { completionScript } from '../../src/completion/scripts.js';
import { buildProgram } from '../../src/program.js';

const spec = specOf(buildProgram());
const words = (r: ReturnType<typeof complete>) => ('words' in r ? r.words : r.kind);

describe('completion candidates', () => {
  it('offers commands and aliases first, without hidden ones', () => {
    const top = words(complete(spec, ['']));
    expect(top).toEqual(
      expect.arrayContaining(['ls', 'rm', 'connect', 'cn', 'exec', 'snapshot', 'completion']),
    );
    expect(top).not.toContain('__complete');
  });

  it('asks for sandbox ids where a command takes one', () => {
    for (const w of [
      ['connect', ''],
      ['cn', ''],
      ['exec', ''],
      ['rm', 'abc', ''],
      ['snapshot', 'create', ''],
    ])
      expect(words(complete(spec, w))).toBe('sandbox');
    expect(words(complete(spec, ['snapshot', 'ls', '--sandbox-id', '']))).toBe('sandbox');
    expect(words(complete(spec, ['pause', '-o', 'json', '']))).toBe('sandbox');
  });

  it('completes later positionals by their kind', () => {
    expect(words(complete(spec, ['upload', 'id', '']))).toBe('path');
    expect(words(complete(spec, ['upload', 'id', 'f', '']))).toEqual([]);
    expect(words(complete(spec, ['start', '']))).toBe('template');
    expect(words(complete(spec, ['completion', '']))).toEqual(['bash', 'zsh', 'fish']);
    expect(words(complete(spec, ['exec', 'id', '--', '']))).toEqual([]);
  });

  it('completes subcommands, options and option values', () => {
    expect(words(complete(spec, ['snapshot', '']))).toEqual(['create', 'ls', 'list']);
    expect(words(complete(spec, ['ls', '--']))).toEqual(
      expect.arrayContaining(['--state', '--metadata', '--output']),
    );
    expect(words(complete(spec, ['ls', '--output', '']))).toEqual(['table', 'json']);
    expect(words(complete(spec, ['ls', '--state', '']))).toEqual([]);
  });

  it('has a script for every shell that calls the hidden command', () => {
    for (const sh of ['bash', 'zsh', 'fish'] as const)
      expect(completionScript(sh)).toContain('aenv __complete --');
  });
});

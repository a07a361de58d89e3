import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/program.js';

function walk(cmd: Command, prefix: string[] = []): [string, Command][] {
  return cmd.commands.flatMap((c) => {
    const name = [...prefix, c.name()];
    return [[name.join(' '), c] as [string, Command], ...walk(c, name)];
  });
}

const program = buildProgram();
const commands = walk(program).filter(([, c]) => !(c as unknown as { _hidden?: boolean })._hidden);

describe('the command tree', () => {
  it('has every command of the CLI spec, with its aliases', () => {
    const names = commands.map(([n]) => n);
    for (const n of [
      'auth',
      'pull',
      'build',
      'template ls',
      'template rm',
      'template watch',
      'start',
      'connect',
      'exec',
      'ls',
      'pause',
      'resume',
      'timeout',
      'rm',
      'fork',
      'snapshot create',
      'snapshot ls',
      'upload',
      'download',
      'completion',
    ])
      expect(names).toContain(n);
    expect(program.commands.find((c) => c.name() === 'connect')!.aliases()).toContain('cn');
  });

  it('documents every command with a description and examples', () => {
    for (const [name, cmd] of commands) {
      expect(cmd.description(), name).not.toBe('');
      let help = '';
      cmd.configureOutput({ writeOut: (s) => (help += s) });
      cmd.outputHelp();
      expect(help, name).toMatch(/Examples?:/);
    }
  });
});

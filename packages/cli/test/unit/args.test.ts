import { describe, expect, it } from 'vitest';
import {
  commandLine,
  exitCodeOf,
  parseInteger,
  parseKeyValues,
  parseSeconds,
  parseStates,
  shellQuote,
  templateNameForImage,
} from '../../src/lib/args.js';
import { UsageError } from '../../src/errors.js';

describe('number and duration options', () => {
  it('parses whole numbers within bounds', () => {
    expect(parseInteger('8', '--count', 1, 16)).toBe(8);
    expect(() => parseInteger('0', '--count', 1)).toThrow(/between 1/);
    expect(() => parseInteger('1.5', '--count')).toThrow(UsageError);
    expect(() => parseInteger('-3', '--count')).toThrow(/whole number/);
  });

  it('parses seconds and durations', () => {
    expect(parseSeconds('300', 't')).toBe(300);
    expect(parseSeconds('90s', 't')).toBe(90);
    expect(parseSeconds('5m', 't')).toBe(300);
    expect(parseSeconds('1h30m', 't')).toBe(5400);
    expect(parseSeconds('2D', 't')).toBe(172_800);
    expect(() => parseSeconds('0', 't')).toThrow(/at least 1/);
    expect(() => parseSeconds('soon', 't')).toThrow(/duration/);
    expect(() => parseSeconds('5 m', 't')).toThrow(UsageError);
  });
});

describe('key=value options', () => {
  it('builds a map, keeping = inside values', () => {
    expect(parseKeyValues(['a=1', 'b=x=y', 'c='], '--env')).toEqual({ a: '1', b: 'x=y', c: '' });
    expect(parseKeyValues(undefined, '--env')).toEqual({});
  });

  it('rejects pairs without a key', () => {
    expect(() => parseKeyValues(['=1'], '--metadata')).toThrow(/key=value/);
    expect(() => parseKeyValues(['novalue'], '--metadata')).toThrow(/key=value/);
  });

  it('validates states', () => {
    expect(parseStates('running, PAUSED,running')).toEqual(['running', 'paused']);
    expect(() => parseStates('running,dead')).toThrow(/unknown state "dead"/);
    expect(() => parseStates(',')).toThrow(/at least one/);
  });
});

describe('exec command lines', () => {
  it('quotes for a POSIX shell', () => {
    expect(shellQuote('plain-word_1.txt')).toBe('plain-word_1.txt');
    expect(shellQuote('')).toBe("''");
    expect(shellQuote('a b')).toBe("'a b'");
    expect(shellQuote("it's")).toBe("'it'\\''s'");
    expect(shellQuote('$HOME')).toBe("'$HOME'");
  });

  it('keeps one argument as a command line and quotes an argv', () => {
    expect(commandLine(['ls /etc | wc -l'])).toBe('ls /etc | wc -l');
    expect(commandLine(['echo', 'a b', '$X'])).toBe("echo 'a b' '$X'");
    expect(() => commandLine([])).toThrow(/no command/);
  });

  it('maps end events to exit codes like a shell', () => {
    expect(exitCodeOf({ exitCode: 0, exited: true, status: 'exit status 0' })).toBe(0);
    expect(exitCodeOf({ exitCode: 3, exited: true, status: 'exit status 3' })).toBe(3);
    expect(exitCodeOf({ exitCode: -1, exited: false, status: 'signal: killed' })).toBe(137);
    expect(exitCodeOf({ exitCode: -1, exited: false, status: 'signal: terminated' })).toBe(143);
    expect(exitCodeOf({ exitCode: -1, exited: false, status: 'weird' })).toBe(255);
  });
});

describe('template names for images', () => {
  it('uses the last path component and a non-latest tag', () => {
    expect(templateNameForImage('python:3.12-slim')).toBe('python-3.12-slim');
    expect(templateNameForImage('docker.io/library/node')).toBe('node');
    expect(templateNameForImage('node:latest')).toBe('node');
    expect(templateNameForImage('ghcr.io/Org/My_App:1.0@sha256:abc')).toBe('my_app-1.0');
    expect(templateNameForImage('localhost:5000/tools/x')).toBe('x');
  });

  it('refuses images it cannot name', () => {
    expect(() => templateNameForImage('///')).toThrow(/--name/);
  });
});

import { describe, expect, it } from 'vitest';
import { logicalLines, parseDockerfile, splitWords } from '../../src/lib/dockerfile.js';

describe('Dockerfile lexing', () => {
  it('joins continuations and drops comments', () => {
    const lines = logicalLines('# c\nFROM x\n\nRUN a && \\\n  # inner\n  b\nenv A=1\n');
    expect(lines.map((l) => [l.keyword, l.rest, l.line])).toEqual([
      ['FROM', 'x', 2],
      ['RUN', 'a &&   b', 4],
      ['ENV', 'A=1', 7],
    ]);
  });

  it('splits words with quotes and escapes', () => {
    expect(splitWords(`A="x y" B='$z' C=a\\ b`)).toEqual(['A=x y', 'B=$z', 'C=a b']);
    expect(() => splitWords('"open')).toThrow(/unterminated/);
  });
});

describe('parseDockerfile', () => {
  it('turns instructions into E2B build steps', () => {
    const b = parseDockerfile(
      [
        'FROM --platform=linux/amd64 python:3.12-slim AS base',
        'ARG VERSION=1.0',
        'ARG EMPTY',
        'ENV A=1 B="two words"',
        'ENV LEGACY value with spaces',
        'RUN apt-get update && \\',
        '    apt-get install -y curl',
        'RUN ["pip", "install", "uv"]',
        'COPY --chown=user:user --chmod=755 app.py lib/ /app/',
        'EXPOSE 8080',
        'CMD ["python", "/app/app.py"]',
      ].join('\n'),
    );
    expect(b.fromImage).toBe('python:3.12-slim');
    expect(b.steps).toEqual([
      { type: 'USER', args: ['root'] },
      { type: 'WORKDIR', args: ['/'] },
      { type: 'ENV', args: ['VERSION', '1.0'] },
      { type: 'ENV', args: ['EMPTY', ''] },
      { type: 'ENV', args: ['A', '1', 'B', 'two words'] },
      { type: 'ENV', args: ['LEGACY', 'value with spaces'] },
      { type: 'RUN', args: ['apt-get update &&     apt-get install -y curl'] },
      { type: 'RUN', args: ['pip install uv'] },
      { type: 'COPY', args: ['app.py', '/app/', 'user:user', '755'] },
      { type: 'COPY', args: ['lib/', '/app/', 'user:user', '755'] },
      { type: 'USER', args: ['user'] },
      { type: 'WORKDIR', args: ['/home/user'] },
    ]);
    expect(b.startCmd).toBe('python /app/app.py');
    expect(b.ignored).toEqual(['EXPOSE (line 10)']);
  });

  it('keeps USER and WORKDIR set by the file and combines ENTRYPOINT with CMD', () => {
    const b = parseDockerfile(
      'FROM node:22\nUSER node\nWORKDIR /srv\nENTRYPOINT ["node"]\nCMD ["server.js"]\n',
    );
    expect(b.steps.slice(-2)).toEqual([
      { type: 'USER', args: ['node'] },
      { type: 'WORKDIR', args: ['/srv'] },
    ]);
    expect(b.startCmd).toBe('node server.js');
  });

  it('rejects what templates cannot express', () => {
    expect(() => parseDockerfile('RUN x')).toThrow(/no FROM/);
    expect(() => parseDockerfile('FROM a AS b\nFROM c')).toThrow(/multi-stage/);
    expect(() => parseDockerfile('FROM a\nCOPY --from=b /x /y')).toThrow(/--from/);
    expect(() => parseDockerfile('FROM a\nRUN --mount=type=cache,target=/x true')).toThrow(/not supported/);
    expect(() => parseDockerfile('FROM a\nADD https://x.y/z /z')).toThrow(/URL/);
    expect(() => parseDockerfile('FROM a\nFOO bar')).toThrow(/unknown instruction FOO/);
    expect(() => parseDockerfile('FROM a\nCOPY onlyone')).toThrow(/source and a destination/);
  });
});

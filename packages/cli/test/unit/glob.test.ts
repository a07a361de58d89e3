import { describe, expect, it } from 'vitest';
import { globToRegExp, hasGlob, isIgnored, parseIgnoreFile } from '../../src/lib/glob.js';

describe('glob matching', () => {
  it('keeps * and ? within a segment and lets ** cross them', () => {
    expect(globToRegExp('*.py').test('a.py')).toBe(true);
    expect(globToRegExp('*.py').test('d/a.py')).toBe(false);
    expect(globToRegExp('**/*.py').test('d/e/a.py')).toBe(true);
    expect(globToRegExp('**/*.py').test('a.py')).toBe(true);
    expect(globToRegExp('file?.txt').test('file1.txt')).toBe(true);
    expect(globToRegExp('[ab].c').test('b.c')).toBe(true);
    expect(globToRegExp('[!ab].c').test('b.c')).toBe(false);
    expect(globToRegExp('a.b').test('axb')).toBe(false);
    expect(hasGlob('src/*.ts')).toBe(true);
    expect(hasGlob('src/app.ts')).toBe(false);
  });

  it('applies .dockerignore to paths and everything below them', () => {
    const ignore = parseIgnoreFile('# comment\nnode_modules\n/dist/\n*.log\n!keep.log\n\n');
    expect(isIgnored('node_modules', ignore)).toBe(true);
    expect(isIgnored('node_modules/x/y.js', ignore)).toBe(true);
    expect(isIgnored('dist/a.js', ignore)).toBe(true);
    expect(isIgnored('debug.log', ignore)).toBe(true);
    expect(isIgnored('src/debug.log', ignore)).toBe(false);
    expect(isIgnored('src/app.ts', ignore)).toBe(false);
  });
});

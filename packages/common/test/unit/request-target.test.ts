import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/errors.js';
import { normalizeTarget } from '../../src/request-target.js';

describe('normalizeTarget', () => {
  it.each([
    ['/health', '/health'],
    ['/%68ealth', '/health'],
    ['/dashboard/%61pi/sandboxes?x=%61', '/dashboard/api/sandboxes?x=%61'],
    ['/dashboard/%2561pi/sandboxes', '/dashboard/%2561pi/sandboxes'],
    ['/nodes/n%2f1', '/nodes/n%2F1'],
    ['/nodes/n%201', '/nodes/n%201'],
    ['/health/../sandboxes', '/sandboxes'],
    ['/dashboard/x/%2e%2e/api/sandboxes', '/dashboard/api/sandboxes'],
    ['/a/./b/.', '/a/b/'],
    ['/a/b/..', '/a/'],
    ['/../../etc', '/etc'],
    ['http://x.test:80/health?y', '/health?y'],
    ['http://x.test/', '/'],
  ])('%s is %s', (target, want) => {
    expect(normalizeTarget(target)).toBe(want);
  });

  it.each([
    '*',
    'x',
    '//',
    '//evil.test/health',
    '/%E0',
    '/a%',
    '/a%zz',
    '/a%00b',
    '/%0d%0aSet-Cookie:x',
    '/%C0%AF',
  ])('refuses %s as bad input', (target) => {
    expect(() => normalizeTarget(target)).toThrow(DomainError);
    try {
      normalizeTarget(target);
    } catch (err) {
      expect((err as DomainError).kind).toBe('invalid');
    }
  });
});

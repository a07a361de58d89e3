import { describe, expect, it } from 'vitest';
import {
  contentDisposition,
  identityAcceptable,
  negotiateEncoding,
  parseContentEncoding,
  parseRange,
} from '../../src/http/negotiate.js';

describe('/files content negotiation', () => {
  it('picks gzip or identity from Accept-Encoding like E2B envd', () => {
    expect(negotiateEncoding(undefined)).toBe('identity');
    expect(negotiateEncoding('gzip')).toBe('gzip');
    expect(negotiateEncoding('GZIP;q=0.5, identity;q=0.4')).toBe('gzip');
    expect(negotiateEncoding('identity;q=1, gzip;q=0.5')).toBe('identity');
    expect(negotiateEncoding('br')).toBe('identity');
    expect(negotiateEncoding('gzip;q=0')).toBe('identity');
    expect(negotiateEncoding('*')).toBe('identity');
    expect(negotiateEncoding('*;q=0.5, identity;q=0')).toBe('gzip');
    expect(negotiateEncoding('br, identity;q=0')).toBeUndefined();
    expect(negotiateEncoding('br, *;q=0')).toBeUndefined();
    expect(identityAcceptable('gzip')).toBe(true);
    expect(identityAcceptable('identity;q=0')).toBe(false);
    expect(identityAcceptable('*;q=0, identity;q=0.1')).toBe(true);
  });

  it('accepts gzip and identity uploads only', () => {
    expect(parseContentEncoding(undefined)).toBe('identity');
    expect(parseContentEncoding('identity')).toBe('identity');
    expect(parseContentEncoding('GZip')).toBe('gzip');
    expect(() => parseContentEncoding('br')).toThrow(/unsupported Content-Encoding: br/);
  });

  it('parses one byte range', () => {
    expect(parseRange('bytes=0-3', 10)).toEqual({ start: 0, end: 3 });
    expect(parseRange('bytes=5-', 10)).toEqual({ start: 5, end: 9 });
    expect(parseRange('bytes=-4', 10)).toEqual({ start: 6, end: 9 });
    expect(parseRange('bytes=-40', 10)).toEqual({ start: 0, end: 9 });
    expect(parseRange('bytes=2-400', 10)).toEqual({ start: 2, end: 9 });
    expect(parseRange('bytes=10-', 10)).toBe('unsatisfiable');
    expect(parseRange('bytes=4-2', 10)).toBe('unsatisfiable');
    expect(parseRange('bytes=0-1,4-5', 10)).toBeUndefined();
    expect(parseRange('items=0-1', 10)).toBeUndefined();
    expect(parseRange('bytes=-', 10)).toBeUndefined();
  });

  it('writes Content-Disposition like Go mime.FormatMediaType', () => {
    expect(contentDisposition('a.txt')).toBe('inline; filename=a.txt');
    expect(contentDisposition('my file "1".txt')).toBe('inline; filename="my file \\"1\\".txt"');
    expect(contentDisposition('žluť.txt')).toBe("inline; filename*=utf-8''%C5%BElu%C5%A5.txt");
  });
});

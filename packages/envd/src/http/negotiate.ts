import { invalidArgument } from '../errors.js';

/** HTTP content negotiation for /files, following E2B's envd (RFC 7231 §5.3.4 semantics). */

interface Coding {
  coding: string;
  q: number;
}

function parseCodings(header: string): Coding[] {
  return header
    .split(',')
    .map((part) => {
      const [name, ...params] = part.split(';');
      let q = 1;
      for (const param of params) {
        const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(param);
        if (m && !Number.isNaN(Number(m[1]))) q = Number(m[1]);
      }
      return { coding: name!.trim().toLowerCase(), q };
    })
    .filter((c) => c.coding !== '');
}

/** Whether identity is refused: `identity;q=0`, or `*;q=0` without an explicit identity. */
function identityRejected(codings: Coding[]): boolean {
  const identity = codings.filter((c) => c.coding === 'identity');
  if (identity.some((c) => c.q === 0)) return true;
  return codings.some((c) => c.coding === '*' && c.q === 0) && !identity.some((c) => c.q > 0);
}

export function identityAcceptable(header: string | undefined): boolean {
  return !header || !identityRejected(parseCodings(header));
}

/**
 * The encoding to send a download in, from Accept-Encoding: gzip or identity, or undefined when
 * the client accepts neither (406).
 */
export function negotiateEncoding(header: string | undefined): 'gzip' | 'identity' | undefined {
  if (!header) return 'identity';
  const codings = parseCodings(header);
  const rejected = identityRejected(codings);
  for (const c of [...codings].sort((a, b) => b.q - a.q)) {
    if (c.q === 0) continue;
    if (c.coding === 'identity') return 'identity';
    if (c.coding === '*') return rejected ? 'gzip' : 'identity';
    if (c.coding === 'gzip') return 'gzip';
  }
  return rejected ? undefined : 'identity';
}

/** Content-Encoding of an upload: identity (none) or gzip; anything else is refused. */
export function parseContentEncoding(header: string | undefined): 'gzip' | 'identity' {
  const coding = (header ?? '').split(';')[0]!.trim().toLowerCase();
  if (coding === '' || coding === 'identity') return 'identity';
  if (coding === 'gzip') return 'gzip';
  throw invalidArgument(`unsupported Content-Encoding: ${header}, supported: [gzip]`);
}

/**
 * A single `bytes=` range of a file of `size` bytes (inclusive ends). Several ranges or a header
 * that is not a byte range are ignored (the whole file is sent), as RFC 9110 allows.
 */
export function parseRange(
  header: string,
  size: number,
): { start: number; end: number } | 'unsatisfiable' | undefined {
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(size - suffix, 0);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (start >= size || end < start) return 'unsatisfiable';
  }
  return { start, end };
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** `inline; filename=...` as Go's mime.FormatMediaType writes it (RFC 2231 for non-ASCII). */
export function contentDisposition(filename: string): string {
  if (TOKEN.test(filename)) return `inline; filename=${filename}`;
  if (/^[\x20-\x7e]*$/.test(filename)) return `inline; filename="${filename.replace(/(["\\])/g, '\\$1')}"`;
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
  return `inline; filename*=utf-8''${encoded}`;
}

import { DomainError } from './errors.js';

/** Unreserved characters (RFC 3986 §2.3): their escapes and themselves name the same path. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** `scheme://authority` of an absolute-form target (RFC 9112 §3.2.2), which servers must accept. */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

const bad = (message: string) => new DomainError('invalid', message);

/** `path` with `.` and `..` segments resolved (RFC 3986 §5.2.4); `..` never climbs above `/`. */
function removeDotSegments(path: string): string {
  const segments = path.split('/');
  const out: string[] = [];
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i]!;
    const last = i === segments.length - 1;
    if (s === '.' || s === '..') {
      if (s === '..') out.pop();
      if (last) out.push('');
    } else out.push(s);
  }
  return `/${out.join('/')}`;
}

/**
 * The one form of a control request's target that routing, the key check and the nodes it is
 * forwarded to all see: origin-form (an absolute-form target loses its scheme and authority),
 * escapes of unreserved characters decoded (`/%68ealth` is `/health`), others upper-cased, dot
 * segments resolved, the query kept as sent. A target that is not a path (`*`, `//x`), has a malformed escape,
 * escapes bytes that are not UTF-8, or a control character, is refused (400): it names no route.
 */
export function normalizeTarget(target: string): string {
  const rest = target.replace(ABSOLUTE_FORM, '');
  const q = rest.indexOf('?');
  const raw = q < 0 ? rest : rest.slice(0, q);
  const query = q < 0 ? '' : rest.slice(q);
  // `//x` is a network-path reference (a host, to URL parsers), not a path.
  if (!raw.startsWith('/') || raw.startsWith('//'))
    throw bad(`request target ${JSON.stringify(target.slice(0, 100))} is not a path`);
  if (/%(?![0-9A-Fa-f]{2})/.test(raw)) throw bad('request path has a malformed escape');
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw bad('request path escapes bytes that are not UTF-8');
  }
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (/[\x00-\x1f\x7f]/.test(decoded)) throw bad('request path has a control character');
  const canonical = raw.replace(/%([0-9A-Fa-f]{2})/g, (escape, hex: string) => {
    const c = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : escape.toUpperCase();
  });
  return removeDotSegments(canonical) + query;
}

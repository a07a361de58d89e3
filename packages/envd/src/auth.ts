import { timingSafeEqual } from 'node:crypto';

/** Constant-time string equality (length is not secret here: tokens have a fixed format). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The username of an `Authorization: Basic base64(user:)` header, if there is one. */
export function basicAuthUser(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Basic\s+(\S+)$/i.exec(header.trim());
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const name = colon < 0 ? decoded : decoded.slice(0, colon);
  return name || undefined;
}

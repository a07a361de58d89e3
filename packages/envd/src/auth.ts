import { createHash, timingSafeEqual } from 'node:crypto';

/** Constant-time string equality (length is not secret here: tokens have a fixed format). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export type FileOperation = 'read' | 'write';

/** `v1_` + unpadded base64 of sha256 over `path:operation:user:token[:expiry]` (E2B's format). */
export function fileSignature(
  path: string,
  operation: FileOperation,
  user: string,
  token: string,
  expiry?: number,
): string {
  const parts = [path, operation, user, token];
  if (expiry !== undefined) parts.push(String(expiry));
  return 'v1_' + createHash('sha256').update(parts.join(':')).digest('base64').replace(/=+$/, '');
}

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

/**
 * Checks a signed /files URL. A signature made without a username is accepted with the empty
 * name (E2B's envd) and with "undefined", which is what the JS SDK 2.x puts in the signed string
 * when the caller gives no user.
 */
export function checkFileSignature(opts: {
  signature: string | undefined;
  expiry: string | undefined;
  path: string;
  operation: FileOperation;
  username: string | undefined;
  token: string;
  nowSeconds: number;
}): SignatureCheck {
  if (!opts.signature) return { ok: false, reason: 'missing signature query parameter' };
  let expiry: number | undefined;
  if (opts.expiry !== undefined) {
    expiry = Number(opts.expiry);
    if (!Number.isInteger(expiry)) return { ok: false, reason: 'invalid signature expiration' };
  }
  const names = opts.username !== undefined ? [opts.username] : ['', 'undefined'];
  const valid = names.some((u) =>
    safeEqual(fileSignature(opts.path, opts.operation, u, opts.token, expiry), opts.signature!),
  );
  if (!valid) return { ok: false, reason: 'invalid signature' };
  if (expiry !== undefined && expiry < opts.nowSeconds) {
    return { ok: false, reason: 'signature is already expired' };
  }
  return { ok: true };
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

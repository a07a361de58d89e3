import { createHash } from 'node:crypto';
import { safeEqual } from './auth.js';

/**
 * Signed /files URLs (E2B's `uploadUrl`/`downloadUrl` on a secure sandbox). Dependency-free so
 * the node can use the same code to find which sandbox a signed URL belongs to.
 */

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

/** The parts of a /files request a signature covers, as they arrive in its query string. */
export interface SignedFileRequest {
  signature: string | undefined;
  /** `signature_expiration`, unix seconds. */
  expiry: string | undefined;
  path: string;
  operation: FileOperation;
  /** The `username` query parameter, undefined when absent. */
  username: string | undefined;
}

/** The signed request's fields of a /files URL. */
export function signedFileRequest(query: URLSearchParams, method: string): SignedFileRequest {
  return {
    signature: query.get('signature') ?? undefined,
    expiry: query.get('signature_expiration') ?? undefined,
    path: query.get('path') ?? '',
    operation: method === 'POST' ? 'write' : 'read',
    username: query.get('username') ?? undefined,
  };
}

function parseExpiry(expiry: string | undefined): number | undefined | 'invalid' {
  if (expiry === undefined) return undefined;
  const n = Number(expiry);
  return /^-?\d+$/.test(expiry) && Number.isSafeInteger(n) ? n : 'invalid';
}

/**
 * Whether the signature was made with `token` (expiry not checked). A signature made without a
 * username is accepted with the empty name (E2B's envd and SDK 2.x) and with "undefined", which
 * older JS SDKs put in the signed string when the caller gave no user.
 */
export function signatureMatches(req: SignedFileRequest, token: string): boolean {
  const expiry = parseExpiry(req.expiry);
  if (!req.signature || expiry === 'invalid') return false;
  const names = req.username !== undefined ? [req.username] : ['', 'undefined'];
  return names.some((u) =>
    safeEqual(fileSignature(req.path, req.operation, u, token, expiry), req.signature!),
  );
}

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

/** Checks a signed /files URL against the sandbox's token and the clock (E2B's messages). */
export function checkFileSignature(
  req: SignedFileRequest,
  token: string,
  nowSeconds: number,
): SignatureCheck {
  if (!req.signature) return { ok: false, reason: 'missing signature query parameter' };
  const expiry = parseExpiry(req.expiry);
  if (expiry === 'invalid') return { ok: false, reason: 'invalid signature expiration' };
  if (!signatureMatches(req, token)) return { ok: false, reason: 'invalid signature' };
  if (expiry !== undefined && expiry < nowSeconds)
    return { ok: false, reason: 'signature is already expired' };
  return { ok: true };
}

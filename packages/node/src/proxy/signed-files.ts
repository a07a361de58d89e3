import { signatureMatches, signedFileRequest } from '@agentenv/envd/file-signature';
import { ENVD_PORT } from '@agentenv/protocol';
import type { SandboxRoute } from '@agentenv/common';

/** What the node knows of a sandbox that can sign URLs: the secure ones. */
export interface SigningSandbox {
  sandboxId: string;
  envdAccessToken?: string;
}

/**
 * E2B's SDK builds signed `/files` URLs on the sandbox URL, which with `E2B_SANDBOX_URL` is the
 * node's origin with no sandbox in it (curl sends no routing headers). The signature is keyed by
 * one sandbox's access token, so it names the sandbox: the one whose token reproduces it. envd
 * then checks it again, with the expiry. Pure: the caller passes the sandboxes, asked for only
 * when the request carries a signature (every request to the node comes through here, and
 * listing the sandboxes reads every record).
 */
export function signedFilesRoute(
  url: string,
  method: string | undefined,
  sandboxes: () => Iterable<SigningSandbox>,
): SandboxRoute | 'no-match' | undefined {
  if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') return undefined;
  const q = url.indexOf('?');
  if ((q < 0 ? url : url.slice(0, q)) !== '/files' || q < 0) return undefined;
  const req = signedFileRequest(new URLSearchParams(url.slice(q + 1)), method);
  if (!req.signature) return undefined;
  for (const s of sandboxes()) {
    if (s.envdAccessToken && signatureMatches(req, s.envdAccessToken))
      return { sandboxId: s.sandboxId, port: ENVD_PORT, path: url, native: false };
  }
  return 'no-match';
}

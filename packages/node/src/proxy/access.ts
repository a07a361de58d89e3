import type { IncomingMessage } from 'node:http';
import { DomainError, nodeOnlyEnvdRefusal, safeEqual, type SandboxRoute } from '@agentenv/common';
import { signatureMatches, signedFileRequest } from '@agentenv/envd/file-signature';
import { ENVD_PORT } from '@agentenv/protocol';
import type { SandboxRecord } from '../orchestrator/index.js';

/** Refuses what no sandbox takes as traffic, before the sandbox is even looked up. */
export function refuseNodeOnly(route: SandboxRoute): void {
  const refusal = nodeOnlyEnvdRefusal(route, ENVD_PORT);
  if (refusal) throw refusal;
}

/**
 * A request's credentials for `rec`, checked before the request may resume, wake or reach it:
 * the traffic token for a port of a sandbox without public traffic. envd checks its own access
 * token, but only once the sandbox runs: so for a paused secure sandbox, the proxy asks for it
 * (or a signed /files URL) before it resumes the sandbox.
 */
export function authorize(
  rec: SandboxRecord,
  route: SandboxRoute,
  req: Pick<IncomingMessage, 'headers' | 'method'>,
): void {
  if (route.port !== ENVD_PORT) {
    if (
      rec.trafficAccessToken &&
      !tokenMatches(req.headers['e2b-traffic-access-token'], rec.trafficAccessToken)
    )
      throw new DomainError('forbidden', 'missing or invalid traffic access token');
    return;
  }
  if (rec.state !== 'paused' || !rec.envdAccessToken) return;
  if (tokenMatches(req.headers['x-access-token'], rec.envdAccessToken)) return;
  if (signedFor(route.path, req.method ?? 'GET', rec.envdAccessToken)) return;
  throw new DomainError(
    'unauthorized',
    'a paused sandbox is resumed by envd traffic only with its access token',
  );
}

const tokenMatches = (given: string | string[] | undefined, token: string): boolean =>
  typeof given === 'string' && safeEqual(given, token);

/** Whether `path` is a /files URL signed with `token` (its expiry is envd's to check). */
function signedFor(path: string, method: string, token: string): boolean {
  const q = path.indexOf('?');
  if (q < 0 || path.slice(0, q) !== '/files') return false;
  const req = signedFileRequest(new URLSearchParams(path.slice(q + 1)), method);
  return !!req.signature && signatureMatches(req, token);
}

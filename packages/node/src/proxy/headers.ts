import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { SandboxRoute } from '@agentenv/common';
import type { SandboxRecord } from '../orchestrator/index.js';

/**
 * What a page served under `/proxy/{id}/{port}/` may do: it shares the node's (or gateway's)
 * origin with the dashboard, which keeps the API key in sessionStorage, so it runs as an opaque
 * origin (no `allow-same-origin`) that cannot read it, yet keeps scripts, forms, popups, dialogs
 * and downloads. `{port}-{id}.{domain}` hosts are origins of their own and are left alone.
 */
export const SANDBOX_PAGE_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads';

/** E2B's placeholder in maskRequestHost for the port the request was for. */
const PORT_PLACEHOLDER = '${PORT}';

/** The Host a sandbox's server sees: its maskRequestHost with the port filled in, if it has one. */
export function maskedHost(rec: Pick<SandboxRecord, 'maskRequestHost'>, port: number): string | undefined {
  return rec.maskRequestHost?.replaceAll(PORT_PLACEHOLDER, String(port));
}

/** Headers of the sandbox's connection to the node, not of the client's. */
const HOP = ['connection', 'keep-alive'];

/**
 * A sandbox's answer headers as the client gets them: without its connection's (the client's
 * own Connection: close holds), and under the sandbox CSP on the /proxy/ path.
 */
export function clientHeaders(up: IncomingMessage, route: SandboxRoute): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ...up.headers };
  for (const h of HOP) delete out[h];
  if (!route.native) return out;
  const own = up.headers['content-security-policy'];
  // A comma separates policies, each of them enforced: the sandbox's own cannot loosen this one.
  out['content-security-policy'] = own ? [own, SANDBOX_PAGE_CSP].flat().join(', ') : SANDBOX_PAGE_CSP;
  return out;
}

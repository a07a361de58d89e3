import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  type Interceptor,
} from '@connectrpc/connect';
import type { ConnectNodeAdapterOptions } from '@connectrpc/connect-node';

type NodeServerRequest = Parameters<NonNullable<ConnectNodeAdapterOptions['contextValues']>>[0];

/** The HTTP request's own headers: Connect's Headers join repeats, which must be refused instead. */
const rawRequest = createContextKey<{ headers: IncomingHttpHeaders; rawHeaders: string[] } | undefined>(
  undefined,
);

export function requestContext(req: NodeServerRequest) {
  return createContextValues().set(rawRequest, { headers: req.headers, rawHeaders: req.rawHeaders });
}

/**
 * Every call needs the cluster's API key in `X-API-Key` (exactly once, compared in constant
 * time), so no unknown process can join the cluster, place sandboxes or read its state.
 */
export function apiKeyInterceptor(expected: string): Interceptor {
  return (next) => async (req) => {
    const raw = req.contextValues.get(rawRequest);
    const problem = raw ? keyProblem(raw.headers, raw.rawHeaders, expected) : 'missing X-API-Key header';
    if (problem) throw new ConnectError(problem, Code.Unauthenticated);
    return next(req);
  };
}

function keyProblem(
  headers: IncomingHttpHeaders,
  rawHeaders: string[],
  expected: string,
): string | undefined {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'x-api-key') count++;
  if (count === 0) return 'missing X-API-Key header';
  if (count > 1) return 'X-API-Key given more than once';
  const a = Buffer.from(String(headers['x-api-key']));
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b) ? undefined : 'invalid API key';
}

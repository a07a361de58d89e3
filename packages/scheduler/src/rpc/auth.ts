import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  type HandlerContext,
} from '@connectrpc/connect';
import type { ConnectNodeAdapterOptions } from '@connectrpc/connect-node';
import { checkApiKey, DomainError } from '@agentenv/common';

type NodeServerRequest = Parameters<NonNullable<ConnectNodeAdapterOptions['contextValues']>>[0];

/** The HTTP request's own headers: Connect's Headers join repeats, which must be refused instead. */
const rawRequest = createContextKey<NodeServerRequest | undefined>(undefined);

export function requestContext(req: NodeServerRequest) {
  return createContextValues().set(rawRequest, req);
}

/**
 * Every call needs the cluster's API key in `X-API-Key`, checked as the node and the gateway
 * check it (exactly once, in constant time), so no unknown process can join the cluster, place
 * sandboxes or read its state. A request gate runs before the request's body is read or parsed:
 * a caller without the key is refused before any of its bytes are decoded.
 */
export function apiKeyGate(expected: string): (context: HandlerContext) => void {
  return (context) => {
    const raw = context.values.get(rawRequest);
    try {
      checkApiKey(raw?.headers ?? {}, raw?.rawHeaders ?? [], expected);
    } catch (err) {
      throw new ConnectError(
        err instanceof DomainError ? err.message : 'invalid API key',
        Code.Unauthenticated,
      );
    }
  };
}

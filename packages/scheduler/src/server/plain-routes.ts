import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import { checkApiKey, DomainError, errorBody, normalizeTarget } from '@agentenv/common';

/** What the plain routes use of a request, under either HTTP version. */
export interface PlainRequest {
  method?: string;
  url?: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
}
/** What the plain routes use of a response, under either HTTP version. */
export interface PlainResponse {
  headersSent: boolean;
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body: string): unknown;
  destroy(): unknown;
}

type PlainHandler = (req: PlainRequest, res: PlainResponse) => void;

export interface PlainRoutesOptions {
  apiKey: string;
  logger: Logger;
  /** The Prometheus text of /metrics and its content type. */
  metrics: () => Promise<{ text: string; contentType: string }>;
}

function send(res: PlainResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type });
  res.end(body);
}

/** A request's failure as its answer (a refusal by its status, anything else a logged 500). */
function answerError(res: PlainResponse, err: unknown, logger: Logger): void {
  if (!(err instanceof DomainError)) logger.error({ err }, 'scheduler request failed');
  if (res.headersSent) return void res.destroy();
  const { status, body } = errorBody(err);
  send(res, status, 'application/json', JSON.stringify(body));
}

/**
 * `handler` with whatever it throws answered as that request's error: no request can stop the
 * scheduler.
 */
export function guarded<Req, Res extends PlainResponse>(
  handler: (req: Req, res: Res) => void,
  logger: Logger,
): (req: Req, res: Res) => void {
  return (req, res) => {
    try {
      handler(req, res);
    } catch (err) {
      answerError(res, err, logger);
    }
  };
}

/**
 * `rpc` for requests Connect can take: it builds a URL of the target and the Host, and throws
 * on one it cannot (`//`, no Host or a bad one), so such a request is refused here as bad input (400).
 */
export function wellFormed<Req extends PlainRequest, Res>(
  rpc: (req: Req, res: Res) => void,
): (req: Req, res: Res) => void {
  return (req, res) => {
    normalizeTarget(req.url ?? '/');
    const authority = req.headers.host ?? req.headers[':authority'];
    if (!authority || !URL.canParse(`http://${String(authority)}/`))
      throw new DomainError('invalid', 'the request has no valid Host header');
    rpc(req, res);
  };
}

/**
 * What no RPC takes: /health and /metrics answer anyone (as on the nodes and the gateway); any
 * other path needs the key like the RPCs, so an unknown path tells nothing without one.
 */
export function plainRoutes(o: PlainRoutesOptions): PlainHandler {
  const fail = (res: PlainResponse, status: number, message: string) =>
    send(res, status, 'application/json', JSON.stringify({ code: status, message }));
  return guarded((req: PlainRequest, res: PlainResponse) => {
    const path = normalizeTarget(req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/health') return send(res, 204, 'text/plain', '');
    if (req.method !== 'GET' || path !== '/metrics') {
      checkApiKey(req.headers, req.rawHeaders, o.apiKey);
      return fail(res, 404, `no route for ${req.method} ${path}`);
    }
    o.metrics()
      .then((m) => send(res, 200, m.contentType, m.text))
      .catch((err: Error) => fail(res, 503, `metrics unavailable: ${err.message}`));
  }, o.logger);
}

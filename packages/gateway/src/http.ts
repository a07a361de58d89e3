import { DomainError, errorBody } from '@agentenv/common';
import type { ClientRequest, ClientResponse } from './upstream/node-http.js';

/** Control-call bodies are small; 1 MiB leaves room for big metadata/env maps (as the node). */
export const BODY_LIMIT = 1 << 20;

export function sendJson(
  res: ClientResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return void res.destroy();
  const data = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, {
    ...(data ? { 'content-type': 'application/json' } : {}),
    'content-length': String(Buffer.byteLength(data)),
    ...headers,
  });
  res.end(data);
}

export function sendError(res: ClientResponse, err: unknown): void {
  const { status, body, retryAfter } = errorBody(err);
  sendJson(res, status, body, retryAfter ? { 'retry-after': String(retryAfter) } : {});
}

export async function readBody(req: ClientRequest, limit = BODY_LIMIT): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > limit) throw new DomainError('invalid', `request body larger than ${limit} bytes`);
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}

/** A JSON object body; an empty body is `{}`. */
export function parseObject(body: Buffer): Record<string, unknown> {
  if (body.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    throw new DomainError('invalid', 'request body is not valid JSON');
  }
  if (!v || typeof v !== 'object' || Array.isArray(v))
    throw new DomainError('invalid', 'request body must be a JSON object');
  return v as Record<string, unknown>;
}

export function queryOf(url: string): URLSearchParams {
  const q = url.indexOf('?');
  return new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
}

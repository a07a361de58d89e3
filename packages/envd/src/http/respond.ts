import type { IncomingMessage, ServerResponse } from 'node:http';
import { EnvdError, httpStatusOf, invalidArgument, toEnvdError } from '../errors.js';

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}

/** Plain-endpoint errors as E2B's envd writes them: `{code: <http status>, message}`. */
export function sendError(res: ServerResponse, err: unknown, context?: string): void {
  const e = toEnvdError(err, context);
  const status = httpStatusOf(e);
  if (res.headersSent) {
    res.destroy(e);
    return;
  }
  sendJson(res, status, { code: status, message: e.message });
}

/** Reads a small JSON body, refusing more than `limit` bytes. */
export async function readJson(req: IncomingMessage, limit = 1 << 20): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new EnvdError('invalid_argument', `request body larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  if (size === 0) return {};
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw invalidArgument('request body is not valid JSON');
  }
}

import { STATUS_CODES, type ServerResponse } from 'node:http';
import { DomainError, errorBody, errorHeaders, type ErrorResponse } from '@agentenv/common';

/**
 * E2B's answer for traffic to a sandbox that is unknown, gone or paused without auto-resume
 * (E2B-COMPAT.md §1): the SDK's isRunning() reads it as "not running".
 */
export function sandboxNotFound(sandboxId: string): DomainError {
  return new DomainError('bad_gateway', 'The sandbox was not found', undefined, { details: { sandboxId } });
}

/** An error as the one mapping words it (@agentenv/common); mid-answer, the connection is cut. */
export function sendError(res: ServerResponse, err: unknown): void {
  sendAnswer(res, errorBody(err));
}

/** An error answer; `close` ends the connection after it (a request whose body was not read). */
export function sendAnswer(res: ServerResponse, r: ErrorResponse, close = false): void {
  if (res.headersSent) return void res.destroy();
  const data = JSON.stringify(r.body);
  res.writeHead(r.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(data),
    ...(close ? { connection: 'close' } : {}),
    ...errorHeaders(r),
  });
  res.end(data);
}

/** The same answer written on the raw socket of a refused WebSocket upgrade. */
export function errorResponseText(err: unknown): string {
  const r = errorBody(err);
  const data = JSON.stringify(r.body);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(data)),
    connection: 'close',
    ...errorHeaders(r),
  };
  const lines = [`HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? ''}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n${data}`;
}

import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { DomainError } from './errors.js';

/** Constant-time equality for secrets given by clients. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Checks `X-API-Key`. A repeated header is refused rather than guessed at (Node joins repeats
 * of unknown headers with ", "), and the comparison takes the same time whatever the input.
 */
export function checkApiKey(headers: IncomingHttpHeaders, rawHeaders: string[], expected: string): void {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'x-api-key') count++;
  if (count === 0) throw new DomainError('unauthorized', 'missing X-API-Key header');
  if (count > 1) throw new DomainError('unauthorized', 'X-API-Key given more than once');
  if (!safeEqual(String(headers['x-api-key']), expected))
    throw new DomainError('unauthorized', 'invalid API key');
}

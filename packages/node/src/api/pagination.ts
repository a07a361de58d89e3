import { invalid } from '@agentenv/common';

/** Opaque page tokens: the offset into a stable, newest-first ordering. */
export function encodePageToken(offset: number): string {
  return Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
}

export function decodePageToken(token: string | undefined): number {
  if (!token) return 0;
  try {
    const o = (JSON.parse(Buffer.from(token, 'base64url').toString()) as { o: unknown }).o;
    if (typeof o === 'number' && Number.isInteger(o) && o >= 0) return o;
  } catch {
    // fall through
  }
  throw invalid('invalid nextToken');
}

export function paginate<T>(
  items: T[],
  limit: number,
  token: string | undefined,
): { page: T[]; next?: string } {
  const offset = decodePageToken(token);
  const page = items.slice(offset, offset + limit);
  return offset + limit < items.length ? { page, next: encodePageToken(offset + limit) } : { page };
}

/**
 * A client cannot hold the node's event streams without bound: its dashboard stream is capped
 * per API key (the default, 32), the next one refused with 429 and Retry-After until one closes.
 */
import { DEFAULT_STREAM_LIMITS } from '@agentenv/common';
import { eventually } from '@agentenv/test-support';
import { API_KEY, URL_BASE, useTestServer } from '@agentenv/test-support/server';
import { afterEach, describe, expect, it } from 'vitest';

useTestServer();

const STREAM = `${URL_BASE}/dashboard/api/stream`;
const opened: AbortController[] = [];

afterEach(() => {
  for (const c of opened.splice(0)) c.abort();
});

/** Opens a stream and leaves it open (its body unread); its status and headers. */
async function openStream(): Promise<Response> {
  const c = new AbortController();
  opened.push(c);
  const r = await fetch(STREAM, { headers: { 'x-api-key': API_KEY }, signal: c.signal });
  if (r.status !== 200) await r.text();
  return r;
}

describe('event streams', () => {
  it('refuses a dashboard stream over the cap per API key, and admits one again when another closes', async () => {
    const cap = DEFAULT_STREAM_LIMITS.maxPerKey;
    const statuses = await Promise.all(Array.from({ length: cap }, () => openStream().then((r) => r.status)));
    expect(statuses).toEqual(Array(cap).fill(200));
    const over = await fetch(STREAM, { headers: { 'x-api-key': API_KEY } });
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toBe('5');
    expect(await over.json()).toEqual({
      code: 429,
      message: `this API key has ${cap} event streams open, the most it may; close one or retry later`,
    });
    opened.shift()!.abort();
    await eventually(async () => expect((await openStream()).status).toBe(200));
  });
});

import { redactSecrets } from '../shared/redact.js';
import { EventStreamParser } from '../shared/sse.js';
import { session } from './session.js';

export type StreamStatus = 'connecting' | 'open' | 'retrying' | 'closed';

/** Waits before reconnect attempt `n` (0-based): 0.5 s doubling to 30 s, with jitter. */
export function backoffMs(n: number, random = Math.random): number {
  const base = Math.min(30_000, 500 * 2 ** n);
  return Math.round(base * (0.75 + 0.5 * random()));
}

/**
 * A server-sent-events stream read with fetch, since EventSource cannot send the API key
 * header. Each event's JSON data reaches `onEvent` parsed and stripped of secret-named fields,
 * as API answers are. Reconnects with backoff until closed; a refused key stops it
 * (`onStatus('closed')` with the reason).
 */
export class LiveStream {
  private abort: AbortController | undefined;
  private attempt = 0;
  private timer: number | undefined;
  private stopped = false;

  constructor(
    private readonly path: string,
    private readonly onEvent: (event: string, data: unknown) => void,
    private readonly onStatus: (s: StreamStatus, detail?: string) => void,
  ) {}

  start(): this {
    void this.connect();
    return this;
  }

  close(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort?.abort();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    this.abort = new AbortController();
    this.onStatus(this.attempt === 0 ? 'connecting' : 'retrying');
    try {
      const key = session.get();
      const res = await fetch(this.path, {
        headers: { accept: 'text/event-stream', ...(key ? { 'x-api-key': key } : {}) },
        signal: this.abort.signal,
        cache: 'no-store',
      });
      if (res.status === 401 || res.status === 403) {
        this.stopped = true;
        this.onStatus('closed', 'the API key was refused');
        return;
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      this.attempt = 0;
      this.onStatus('open');
      const parser = new EventStreamParser();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const e of parser.push(value)) this.onEvent(e.event, parseData(e.data));
      }
    } catch {
      // Aborted by close(), or the connection dropped: both end here; only the latter retries.
    }
    if (this.stopped) return;
    this.onStatus('retrying');
    this.timer = window.setTimeout(() => void this.connect(), backoffMs(this.attempt++));
  }
}

function parseData(text: string): unknown {
  try {
    return redactSecrets(JSON.parse(text) as unknown);
  } catch {
    return undefined;
  }
}

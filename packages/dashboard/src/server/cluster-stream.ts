import type { IncomingMessage, ServerResponse } from 'node:http';
import { toSandboxEvent } from '../shared/events.js';
import { EventStreamParser, formatEvent } from '../shared/sse.js';
import { askable, forwardedHeaders, type ClusterNode } from './fanout.js';

/**
 * The server's open event streams (the gateway's EventStreams): `admit` counts one or throws
 * (at its limits), `write` sends to one unless its client stopped reading, then closes it.
 */
export interface StreamGate {
  admit(key: string | undefined, res: ServerResponse): void;
  write(res: ServerResponse, chunk: string): boolean;
}

export interface ClusterStreamSources {
  nodes: () => Promise<ClusterNode[]>;
  events: (signal: AbortSignal, sandboxID?: string) => AsyncIterable<object>;
  fetch: typeof fetch;
  log: (message: string, err?: unknown) => void;
  streams: StreamGate;
}

/** Node status goes out, and membership is looked at, this often (as a node's own stream). */
const TICK_MS = 2000;
const KEEPALIVE_MS = 15_000;
const RETRY_MS = [1000, 2000, 5000, 10_000];
/** What only a node knows and its stream carries; lifecycle and node status come from the cluster. */
const RELAYED = new Set(['stage', 'sandbox-metrics']);

const pause = (attempt: number) =>
  new Promise((resolve) => setTimeout(resolve, RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]));

/**
 * Runs `follow` again each time it ends or fails, with backoff, until `stop`; `follow` calls its
 * `connected` once it gets through, so that a long-lived stream that drops retries at once.
 */
async function reconnecting(
  stop: AbortSignal,
  dropped: (err: unknown) => void,
  follow: (connected: () => void) => Promise<void>,
): Promise<void> {
  for (let attempt = 0; !stop.aborted; attempt++) {
    try {
      await follow(() => (attempt = 0));
    } catch (err) {
      if (!stop.aborted) dropped(err);
    }
    if (!stop.aborted) await pause(attempt);
  }
}

/** Relays the events only `node` knows (RELAYED) from its own stream, until `stop`. */
function relayNode(
  s: ClusterStreamSources,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  node: ClusterNode,
  stop: AbortSignal,
): Promise<void> {
  return reconnecting(
    stop,
    (err) => s.log(`dashboard: stream of ${node.nodeID} dropped`, err),
    async (connected) => {
      const r = await s.fetch(new URL(`${url.pathname}${url.search}`, node.url), {
        headers: forwardedHeaders(req.headers),
        signal: stop,
      });
      if (!r.ok || !r.body) {
        await r.body?.cancel();
        return;
      }
      connected();
      const parser = new EventStreamParser();
      const decoder = new TextDecoder();
      for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>)
        for (const e of parser.push(decoder.decode(chunk, { stream: true })))
          if (RELAYED.has(e.event)) s.streams.write(res, `event: ${e.event}\ndata: ${e.data}\n\n`);
    },
  );
}

/**
 * The cluster's /dashboard/api/stream (optionally `?sandboxID=`): the same events a node's
 * stream sends, each from where the cluster knows it best. Lifecycle events (`sandbox`) are the
 * cluster scheduler's, node status (`node`) is its view of every node, every 2 s; finished
 * operations (`stage`) and a sandbox's metrics (`sandbox-metrics`) are relayed from each node's
 * own stream. Every source reconnects on its own with backoff until the client goes away. The
 * stream is admitted by `s.streams` (or refused at its limits) and closed by it when the client
 * stops reading.
 */
export async function clusterStream(
  s: ClusterStreamSources,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  const abort = new AbortController();
  const signal = abort.signal;
  const relays = new Map<string, AbortController>();
  const only = url.searchParams.get('sandboxID') ?? undefined;
  const send = (event: string, data: unknown) => s.streams.write(res, formatEvent(event, data));

  const lifecycle = () =>
    reconnecting(
      signal,
      (err) => s.log('dashboard: the cluster event stream dropped', err),
      async (connected) => {
        for await (const e of s.events(signal, only)) {
          connected();
          send('sandbox', toSandboxEvent(e as Record<string, unknown>));
        }
      },
    );

  /** Sends every node's status and relays from the askable ones, dropping nodes that left. */
  const tick = async (known?: ClusterNode[]) => {
    // A failed look changes nothing: the relays carry on until the next one.
    const nodes = known ?? (await listNodes());
    if (!nodes || signal.aborted) return;
    for (const n of nodes) send('node', n.info);
    const ids = new Set(askable(nodes).map((n) => n.nodeID));
    for (const [id, c] of relays) {
      if (ids.has(id)) continue;
      c.abort();
      relays.delete(id);
    }
    for (const n of askable(nodes)) {
      if (relays.has(n.nodeID)) continue;
      const c = new AbortController();
      relays.set(n.nodeID, c);
      void relayNode(s, req, res, url, n, AbortSignal.any([signal, c.signal]));
    }
  };
  const listNodes = () =>
    s.nodes().catch((err: unknown) => {
      s.log('dashboard: listing the nodes failed', err);
      return undefined;
    });

  const key = req.headers['x-api-key'];
  s.streams.admit(typeof key === 'string' ? key : undefined, res);
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
  });
  res.once('close', () => abort.abort());
  const nodes = await listNodes();
  send('hello', { nodeIDs: (nodes ?? []).map((n) => n.nodeID), now: Date.now() });
  void lifecycle();
  await tick(nodes);
  const timers = [
    setInterval(() => void tick(), TICK_MS),
    setInterval(() => s.streams.write(res, ': keepalive\n\n'), KEEPALIVE_MS),
  ];
  signal.addEventListener('abort', () => timers.forEach(clearInterval));
}

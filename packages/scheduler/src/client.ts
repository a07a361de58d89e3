import { createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { peerLookup } from '@agentenv/common';
import { SchedulerService } from '@agentenv/protocol/scheduler';
import { isTransportFailure } from './rpc/errors.js';

export type SchedulerClient = Client<typeof SchedulerService>;

export interface SchedulerClientOptions {
  /**
   * The scheduler's base URL, e.g. http://10.0.0.1:9090, or the URLs of its replicas separated by
   * commas (`schedulerUrls` splits and checks such a list).
   */
  url: string;
  apiKey: string;
  /** `connect` over HTTP/1.1 (default) or `grpc` over HTTP/2. */
  protocol?: 'connect' | 'grpc';
  /** Per call, unless a call sets its own; 0 for none (a client for WatchEvents streams). */
  timeoutMs?: number;
  /** With replicas: how long one may leave a call unanswered before the next is asked too. */
  failoverAfterMs?: number;
}

/** The replicas' base URLs of a comma-separated list; throws on anything but http(s) URLs. */
export function schedulerUrls(list: string): string[] {
  const urls = list
    .split(',')
    .map((s) => s.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  if (!urls.length) throw new Error('no scheduler URL');
  for (const u of urls) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new Error(`not a URL: ${u}`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new Error(`not an http(s) URL: ${u}`);
  }
  return urls;
}

/** How long a replica may take to answer before the call also goes to the next one. */
const FAILOVER_AFTER_MS = 2_000;

/**
 * Replicas share their state through the store, so any of them can answer any call. A call that
 * could not reach one (the socket failed), or that one left unanswered for `afterMs` (a host that
 * went silent: no refusal ever comes), goes to the next; the replica that answered last is asked
 * first, so a dead one costs one failed attempt, not one per call. The last replica tried gets the
 * call's whole deadline.
 */
function failover(urls: string[], afterMs: number): Interceptor {
  let preferred = 0;
  return (next) => async (req) => {
    const method = req.url.slice(urls[0]!.length);
    for (let tried = 0; ; tried++) {
      const i = (preferred + tried) % urls.length;
      const last = tried + 1 >= urls.length;
      const patience = last ? undefined : new AbortController();
      const timer = patience && setTimeout(() => patience.abort(), afterMs);
      try {
        const signal = patience ? AbortSignal.any([req.signal, patience.signal]) : req.signal;
        const res = await next({ ...req, url: urls[i] + method, signal });
        preferred = i;
        return res;
      } catch (err) {
        const silent = patience?.signal.aborted === true && !req.signal.aborted;
        if (last || req.signal.aborted || !(silent || isTransportFailure(err))) throw err;
      } finally {
        clearTimeout(timer);
      }
    }
  };
}

/** A scheduler.v1 client that sends the cluster API key with every call. */
export function createSchedulerClient(o: SchedulerClientOptions): SchedulerClient {
  const urls = schedulerUrls(o.url);
  const withKey: Interceptor = (next) => (req) => {
    req.header.set('x-api-key', o.apiKey);
    return next(req);
  };
  const timeout = o.timeoutMs ?? 10_000;
  const common = {
    baseUrl: urls[0]!,
    interceptors:
      urls.length > 1 ? [withKey, failover(urls, o.failoverAfterMs ?? FAILOVER_AFTER_MS)] : [withKey],
    ...(timeout > 0 ? { defaultTimeoutMs: timeout } : {}),
  };
  // Replicas' names are looked up off libuv's pool, once at a time each (see PeerLookup).
  const { lookup } = peerLookup;
  const transport =
    o.protocol === 'grpc'
      ? createGrpcTransport({ ...common, nodeOptions: { lookup } })
      : createConnectTransport({ ...common, httpVersion: '1.1', nodeOptions: { lookup } });
  return createClient(SchedulerService, transport);
}

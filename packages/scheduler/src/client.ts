import { createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { SchedulerService } from '@agentenv/protocol/scheduler';

export type SchedulerClient = Client<typeof SchedulerService>;

export interface SchedulerClientOptions {
  /** The scheduler's base URL, e.g. http://10.0.0.1:9090. */
  url: string;
  apiKey: string;
  /** `connect` over HTTP/1.1 (default) or `grpc` over HTTP/2. */
  protocol?: 'connect' | 'grpc';
  /** Per call, unless a call sets its own; 0 for none (a client for WatchEvents streams). */
  timeoutMs?: number;
}

/** A scheduler.v1 client that sends the cluster API key with every call. */
export function createSchedulerClient(o: SchedulerClientOptions): SchedulerClient {
  const withKey: Interceptor = (next) => (req) => {
    req.header.set('x-api-key', o.apiKey);
    return next(req);
  };
  const timeout = o.timeoutMs ?? 10_000;
  const common = {
    baseUrl: o.url,
    interceptors: [withKey],
    ...(timeout > 0 ? { defaultTimeoutMs: timeout } : {}),
  };
  const transport =
    o.protocol === 'grpc'
      ? createGrpcTransport(common)
      : createConnectTransport({ ...common, httpVersion: '1.1' });
  return createClient(SchedulerService, transport);
}

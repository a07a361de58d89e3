import { DEFAULT_STREAM_LIMITS, requireApiKey, type StreamLimits } from '@agentenv/common';
import { schedulerUrls } from '@agentenv/scheduler';

type Env = Record<string, string | undefined>;

export class GatewayConfigError extends Error {
  override name = 'GatewayConfigError';
}

/** The gateway's settings, from the environment only (AGENTENV-API.md §3). */
export interface GatewayConfig {
  host: string;
  port: number;
  /** One scheduler's base URL, or its replicas' separated by commas. */
  schedulerUrl: string;
  apiKey: string;
  domains: string[];
  tls?: { certPath: string; keyPath: string };
  maxInFlightCreates: number;
  maxQueuedCreates: number;
  queueWaitMs: number;
  idempotencyTtlMs: number;
  controlTimeoutMs: number;
  startTimeoutMs: number;
  schedulerTimeoutMs: number;
  /** Event streams (GET /events, the dashboard's) open at once, in all and per API key. */
  streams: StreamLimits;
  logLevel: string;
}

function int(env: Env, name: string, dflt: number, min = 0): number {
  const v = env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min)
    throw new GatewayConfigError(`${name} must be an integer ≥ ${min}, not ${v}`);
  return n;
}

/** `host:port`, `[v6]:port` or `:port`. */
export function parseAddr(s: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 0 || port > 65535)
    throw new GatewayConfigError(`GATEWAY_ADDR must be host:port, not ${s}`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

export function loadGatewayConfig(env: Env = process.env): GatewayConfig {
  const schedulerUrl = env.AENV_SCHEDULER_URL ?? 'http://127.0.0.1:9090';
  try {
    schedulerUrls(schedulerUrl);
  } catch (err) {
    throw new GatewayConfigError(`AENV_SCHEDULER_URL: ${(err as Error).message}`);
  }
  let apiKey: string;
  try {
    apiKey = requireApiKey(env);
  } catch (err) {
    throw new GatewayConfigError((err as Error).message, { cause: err });
  }
  const cert = env.AENV_TLS_CERT;
  const key = env.AENV_TLS_KEY;
  if (!!cert !== !!key) throw new GatewayConfigError('AENV_TLS_CERT and AENV_TLS_KEY are set together');
  return {
    ...parseAddr(env.GATEWAY_ADDR ?? '0.0.0.0:8080'),
    schedulerUrl,
    apiKey,
    domains: (env.AENV_SANDBOX_PROXY_DOMAINS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    ...(cert && key ? { tls: { certPath: cert, keyPath: key } } : {}),
    maxInFlightCreates: int(env, 'GATEWAY_MAX_INFLIGHT_CREATES', 48, 1),
    maxQueuedCreates: int(env, 'GATEWAY_CREATE_QUEUE', 512),
    queueWaitMs: int(env, 'GATEWAY_QUEUE_WAIT_MS', 30_000, 1),
    idempotencyTtlMs: int(env, 'GATEWAY_IDEMPOTENCY_TTL_SECS', 600, 1) * 1000,
    controlTimeoutMs: int(env, 'GATEWAY_NODE_TIMEOUT_MS', 60_000, 1),
    startTimeoutMs: int(env, 'GATEWAY_START_TIMEOUT_MS', 300_000, 1),
    schedulerTimeoutMs: int(env, 'GATEWAY_SCHEDULER_TIMEOUT_MS', 10_000, 1),
    streams: {
      maxOpen: int(env, 'GATEWAY_MAX_STREAMS', DEFAULT_STREAM_LIMITS.maxOpen, 1),
      maxPerKey: int(env, 'GATEWAY_MAX_STREAMS_PER_KEY', DEFAULT_STREAM_LIMITS.maxPerKey, 1),
      maxBufferedBytes:
        int(env, 'GATEWAY_STREAM_BUFFER_KB', DEFAULT_STREAM_LIMITS.maxBufferedBytes / 1024, 1) * 1024,
    },
    logLevel: env.AENV_LOG_LEVEL ?? 'info',
  };
}

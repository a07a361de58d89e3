import { requireApiKey } from '@agentenv/common';
import type { PlacementPolicy } from './schedule/scoring/policy.js';
import { DEFAULT_SETTINGS, type ExpectedNode, type SchedulerSettings } from './settings.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface SchedulerConfig {
  addr: { host: string; port: number };
  /** A separate listener for /metrics; absent: /metrics is on the main port. */
  metricsAddr?: { host: string; port: number };
  /** `memory` or a `redis://` URL. */
  store: string;
  apiKey: string;
  logLevel: string;
  settings: SchedulerSettings;
}

type Env = Record<string, string | undefined>;

/** The scheduler's settings from its environment (AGENTENV-API.md §3); mistakes are startup errors. */
export function loadConfig(env: Env = process.env): SchedulerConfig {
  let apiKey: string;
  try {
    apiKey = requireApiKey(env);
  } catch (err) {
    throw new ConfigError((err as Error).message, { cause: err });
  }
  const store = env.AENV_SCHEDULER_STORE || 'memory';
  if (store !== 'memory' && !/^rediss?:\/\//.test(store))
    throw new ConfigError(`invalid AENV_SCHEDULER_STORE '${store}': 'memory' or a redis:// URL`);
  const d = DEFAULT_SETTINGS;
  const policy: PlacementPolicy = {
    ...d.policy,
    cpuOvercommit: num(env, 'AENV_SCHEDULER_CPU_OVERCOMMIT', d.policy.cpuOvercommit, 0.1),
    memoryOvercommit: num(env, 'AENV_SCHEDULER_MEMORY_OVERCOMMIT', d.policy.memoryOvercommit, 0.1),
    minFreeMemoryMib: num(env, 'AENV_SCHEDULER_MIN_FREE_MEMORY_MIB', d.policy.minFreeMemoryMib, 0),
    startsPerSlot: num(env, 'AENV_SCHEDULER_STARTS_PER_SLOT', d.policy.startsPerSlot, 0.1),
    bestOfK: num(env, 'AENV_SCHEDULER_BEST_OF_K', d.policy.bestOfK, 1),
    localityBonus: num(env, 'AENV_SCHEDULER_LOCALITY_BONUS', d.policy.localityBonus, 0),
  };
  return {
    addr: listenAddress(env.SCHEDULER_ADDR || '0.0.0.0:9090', 'SCHEDULER_ADDR'),
    ...(env.SCHEDULER_METRICS_ADDR
      ? { metricsAddr: listenAddress(env.SCHEDULER_METRICS_ADDR, 'SCHEDULER_METRICS_ADDR') }
      : {}),
    store,
    apiKey,
    logLevel: env.AENV_LOG_LEVEL || 'info',
    settings: {
      ...d,
      heartbeatIntervalMs: num(env, 'AENV_SCHEDULER_HEARTBEAT_INTERVAL_MS', d.heartbeatIntervalMs, 100),
      reservationTtlMs: num(env, 'AENV_SCHEDULER_RESERVATION_TTL_MS', d.reservationTtlMs, 100),
      bindingTtlMs: num(env, 'AENV_SCHEDULER_BINDING_TTL_MS', d.bindingTtlMs, 1000),
      nodeGoneAfterMs: num(env, 'AENV_SCHEDULER_NODE_GONE_AFTER_MS', d.nodeGoneAfterMs, 1000),
      expectedNodes: expectedNodes(env.AENV_SCHEDULER_NODES ?? ''),
      policy,
    },
  };
}

function num(env: Env, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min) throw new ConfigError(`invalid ${name} '${raw}': a number >= ${min}`);
  return v;
}

/** `a,b=http://10.0.0.2:8000`: node ids, each optionally with the URL it will advertise. */
export function expectedNodes(list: string): ExpectedNode[] {
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const eq = entry.indexOf('=');
      return eq < 0 ? { nodeId: entry } : { nodeId: entry.slice(0, eq), advertiseUrl: entry.slice(eq + 1) };
    });
}

export function listenAddress(addr: string, name: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:]+)\]|([^:]+)):(\d{1,5})$/.exec(addr);
  const port = Number(m?.[3]);
  if (!m || port > 65535) throw new ConfigError(`invalid ${name} '${addr}' (want host:port)`);
  return { host: m[1] ?? m[2]!, port };
}

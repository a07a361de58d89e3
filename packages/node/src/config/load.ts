import { readFileSync } from 'node:fs';
import { hostname, homedir } from 'node:os';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { Ajv, type ValidateFunction } from 'ajv';
import { DEFAULT_STREAM_LIMITS, readApiKey } from '@agentenv/common';
import { schedulerUrls } from '@agentenv/scheduler';
import { DEFAULT_UNPACK_LIMITS } from '@agentenv/oci';
import { DEFAULT_ALWAYS_DENIED } from '../network/index.js';
import { NodeConfigSchema, type NodeConfig } from './schema.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;
type Json = Record<string, unknown>;

const MiB = 2 ** 20;

const snakeToCamel = (s: string) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** TOML keys are snake_case; the schema is camelCase. Converts keys recursively. */
export function camelKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(camelKeys);
  if (v && typeof v === 'object' && !(v instanceof Date)) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [snakeToCamel(k), camelKeys(x)]));
  }
  return v;
}

function merge(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' && !Array.isArray(b)
        ? merge(b as Json, v as Json)
        : v;
  }
  return out;
}

export function defaults(env: Env): NodeConfig {
  const root = process.getuid?.() === 0;
  return {
    apiAddr: '127.0.0.1:8000',
    homePath: root ? '/var/lib/aenv' : path.join(homedir(), '.local/share/aenv'),
    runtimePath: '/run/aenv',
    runtime: { driver: 'gvisor', virtualizationMode: 'kvm', mergePages: false },
    orchestrator: {
      defaultSandboxTimeoutSecs: 300,
      maxSandboxes: 1000,
      maxConcurrentStarts: 16,
      memoryOvercommit: 4,
      memoryLimitMb: 0,
      idleFreezeSecs: 10,
      idleFreezeCpuPct: 15,
    },
    fork: { maxChildren: 16 },
    pool: { size: 2 },
    sandboxProxy: { domains: [] },
    snapshot: { repositoryBackend: 'posix_fs', localCachePath: '', cacheCapacityGb: 20 },
    backend: { posixFs: { snapshotStore: '' } },
    image: {
      maxLayerMb: DEFAULT_UNPACK_LIMITS.layerBytes / MiB,
      maxLayerEntries: DEFAULT_UNPACK_LIMITS.layerEntries,
      maxImageMb: DEFAULT_UNPACK_LIMITS.imageBytes / MiB,
      maxImageEntries: DEFAULT_UNPACK_LIMITS.imageEntries,
    },
    streams: {
      maxOpen: DEFAULT_STREAM_LIMITS.maxOpen,
      maxPerKey: DEFAULT_STREAM_LIMITS.maxPerKey,
      maxBufferedKb: DEFAULT_STREAM_LIMITS.maxBufferedBytes / 1024,
    },
    volumes: { path: '', quotaMb: 10_240 },
    network: {
      alwaysDeniedCidrs: [...DEFAULT_ALWAYS_DENIED],
      hostRange: '10.201.0.0/16',
      nodeTag: 'n0',
    },
    p2p: {
      enabled: false,
      bindAddrs: ['0.0.0.0:9092'],
      peers: [],
      perPeerLimit: 8,
      requestTimeoutMs: 10_000,
      penaltySecs: 60,
    },
    nodeIdentity: { nodeId: env.HOSTNAME || hostname(), clusterId: 'default' },
    cluster: {},
  };
}

/** The key in AENV_API_KEY or AENV_API_KEY_FILE, read as the scheduler and the gateway read it. */
function apiKeyFromEnv(env: Env): string | undefined {
  try {
    return readApiKey(env);
  } catch (err) {
    throw new ConfigError((err as Error).message, { cause: err });
  }
}

/** An on/off environment variable: on when 1, true, yes or on (any case). */
const isOn = (v: string) => /^(1|true|yes|on)$/i.test(v);

/** Environment variables (AGENTENV-API.md §3) as a partial config. */
export function envOverrides(env: Env): Json {
  const o: Json = {};
  const set = (keys: string[], v: unknown) => {
    let t = o;
    for (const k of keys.slice(0, -1)) t = (t[k] ??= {}) as Json;
    t[keys.at(-1)!] = v;
  };
  if (env.API_ADDR) set(['apiAddr'], env.API_ADDR);
  if (env.AENV_HOME_PATH) set(['homePath'], env.AENV_HOME_PATH);
  if (env.AENV_RUNTIME_PATH) set(['runtimePath'], env.AENV_RUNTIME_PATH);
  const apiKey = apiKeyFromEnv(env);
  if (apiKey) set(['apiKey'], apiKey);
  if (env.AENV_TLS_CERT) set(['tlsCert'], env.AENV_TLS_CERT);
  if (env.AENV_TLS_KEY) set(['tlsKey'], env.AENV_TLS_KEY);
  if (env.AENV_RUNTIME) set(['runtime', 'driver'], env.AENV_RUNTIME);
  if (env.AENV_VIRTUALIZATION_MODE) set(['runtime', 'virtualizationMode'], env.AENV_VIRTUALIZATION_MODE);
  if (env.AENV_MERGE_PAGES) set(['runtime', 'mergePages'], isOn(env.AENV_MERGE_PAGES));
  if (env.AENV_SANDBOX_PROXY_DOMAINS) {
    set(
      ['sandboxProxy', 'domains'],
      env.AENV_SANDBOX_PROXY_DOMAINS.split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );
  }
  if (env.AENV_POOL_SIZE) set(['pool', 'size'], Number(env.AENV_POOL_SIZE));
  if (env.AENV_MAX_SANDBOXES) set(['orchestrator', 'maxSandboxes'], Number(env.AENV_MAX_SANDBOXES));
  if (env.AENV_MEMORY_OVERCOMMIT)
    set(['orchestrator', 'memoryOvercommit'], Number(env.AENV_MEMORY_OVERCOMMIT));
  if (env.AENV_MEMORY_LIMIT_MB) set(['orchestrator', 'memoryLimitMb'], Number(env.AENV_MEMORY_LIMIT_MB));
  if (env.AENV_IDLE_FREEZE_SECS) set(['orchestrator', 'idleFreezeSecs'], Number(env.AENV_IDLE_FREEZE_SECS));
  if (env.AENV_IDLE_FREEZE_CPU_PCT)
    set(['orchestrator', 'idleFreezeCpuPct'], Number(env.AENV_IDLE_FREEZE_CPU_PCT));
  if (env.AENV_SNAPSHOT_STORE) set(['backend', 'posixFs', 'snapshotStore'], env.AENV_SNAPSHOT_STORE);
  if (env.AENV_MAX_STREAMS) set(['streams', 'maxOpen'], Number(env.AENV_MAX_STREAMS));
  if (env.AENV_MAX_STREAMS_PER_KEY) set(['streams', 'maxPerKey'], Number(env.AENV_MAX_STREAMS_PER_KEY));
  if (env.AENV_STREAM_BUFFER_KB) set(['streams', 'maxBufferedKb'], Number(env.AENV_STREAM_BUFFER_KB));
  if (env.AENV_VOLUMES_PATH) set(['volumes', 'path'], env.AENV_VOLUMES_PATH);
  if (env.AENV_VOLUME_QUOTA_MB) set(['volumes', 'quotaMb'], Number(env.AENV_VOLUME_QUOTA_MB));
  if (env.AENV_NETWORK_HOST_RANGE) set(['network', 'hostRange'], env.AENV_NETWORK_HOST_RANGE);
  if (env.AENV_NETWORK_NODE_TAG) set(['network', 'nodeTag'], env.AENV_NETWORK_NODE_TAG);
  if (env.AENV_P2P_ENABLED) set(['p2p', 'enabled'], isOn(env.AENV_P2P_ENABLED));
  if (env.AENV_NODE_ID) set(['nodeIdentity', 'nodeId'], env.AENV_NODE_ID);
  if (env.AENV_CLUSTER_ID) set(['nodeIdentity', 'clusterId'], env.AENV_CLUSTER_ID);
  const scheduler = env.AENV_SCHEDULER_URL || env.AENV_OBSERVABILITY_SCHEDULER_ENDPOINT;
  if (scheduler) set(['cluster', 'schedulerUrl'], scheduler);
  if (env.AENV_ADVERTISE_URL) set(['cluster', 'advertiseUrl'], env.AENV_ADVERTISE_URL);
  return o;
}

/** The TOML file's settings; the file's `[runtime] driver` becomes runtime.driver, etc. */
export function parseConfigFile(text: string, file: string): Json {
  let raw: unknown;
  try {
    raw = parseToml(text);
  } catch (err) {
    throw new ConfigError(`${file}: ${(err as Error).message}`);
  }
  const c = camelKeys(raw) as Json;
  // Flat keys of AGENTENV-API.md §3 that live at the top of the file.
  const { virtualizationMode, ...rest } = c;
  if (virtualizationMode !== undefined) return merge(rest, { runtime: { virtualizationMode } });
  return rest;
}

// Ajv (the validator Fastify runs the routes' schemas through) rather than TypeBox's value
// module: importing that one is hundreds of ES modules, a sixth of the node's start. Compiled on
// the first load, not on import: everything that imports the config's types would pay for it.
let validConfig: ValidateFunction | undefined;

/** Defaults < TOML file (AENV_CONFIG_PATH) < environment, validated as a whole. */
export function loadConfig(env: Env = process.env): NodeConfig {
  let merged = defaults(env) as unknown as Json;
  if (env.AENV_CONFIG_PATH) {
    let text: string;
    try {
      text = readFileSync(env.AENV_CONFIG_PATH, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read config file ${env.AENV_CONFIG_PATH}: ${(err as Error).message}`);
    }
    merged = merge(merged, parseConfigFile(text, env.AENV_CONFIG_PATH));
  }
  merged = merge(merged, envOverrides(env));
  validConfig ??= new Ajv({ allErrors: false }).compile(NodeConfigSchema);
  if (!validConfig(merged)) {
    const e = validConfig.errors?.[0];
    throw new ConfigError(`invalid configuration at ${e?.instancePath || '/'}: ${e?.message ?? 'invalid'}`);
  }
  const config = merged as unknown as NodeConfig;
  // Paths under the home directory follow it unless set on their own.
  config.snapshot.localCachePath ||= path.join(config.homePath, 'snapshot-cache');
  config.backend.posixFs.snapshotStore ||= path.join(config.homePath, 'snapshot-store');
  config.volumes.path ||= path.join(config.homePath, 'volumes');
  parseListenAddress(config.apiAddr);
  if (config.cluster.schedulerUrl) checkSchedulerUrls(config.cluster.schedulerUrl);
  if (!config.tlsCert !== !config.tlsKey) throw new ConfigError('tls_cert and tls_key are set together');
  return config;
}

function checkSchedulerUrls(list: string): void {
  try {
    schedulerUrls(list);
  } catch (err) {
    throw new ConfigError(`scheduler_url (AENV_SCHEDULER_URL): ${(err as Error).message}`);
  }
}

/** `host:port` (IPv6 in brackets) → parts; a bad address is a startup error, not a crash later. */
export function parseListenAddress(addr: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:]+)\]|([^:]+)):(\d{1,5})$/.exec(addr);
  const port = Number(m?.[3]);
  if (!m || port > 65535) throw new ConfigError(`invalid listen address '${addr}' (want host:port)`);
  return { host: m[1] ?? m[2]!, port };
}

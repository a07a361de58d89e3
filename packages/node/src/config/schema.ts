import { Type, type Static } from 'typebox';
import { MIN_API_KEY_LENGTH } from '@agentenv/common';

const Cidr = Type.String({ pattern: '^[0-9a-fA-F:.]+(/[0-9]{1,3})?$' });

/**
 * The node's configuration. Keys mirror the TOML file (snake_case there, camelCase here);
 * every one has a default so that a single machine needs no file at all.
 */
export const NodeConfigSchema = Type.Object({
  apiAddr: Type.String(),
  homePath: Type.String({ minLength: 1 }),
  runtimePath: Type.String({ minLength: 1 }),
  apiKey: Type.Optional(Type.String({ minLength: MIN_API_KEY_LENGTH })),
  /** PEM certificate (chain) and key: the API and sandbox proxy listen with TLS (HTTP/2 by ALPN). */
  tlsCert: Type.Optional(Type.String({ minLength: 1 })),
  tlsKey: Type.Optional(Type.String({ minLength: 1 })),
  runtime: Type.Object({
    /** `firecracker` parses, but the node refuses to start with it until a driver exists. */
    driver: Type.Union([Type.Literal('gvisor'), Type.Literal('firecracker')]),
    /** KVM or PVM for Firecracker microVMs; gVisor needs no virtualisation and ignores it. */
    virtualizationMode: Type.Union([Type.Literal('kvm'), Type.Literal('pvm')]),
    /**
     * Same-page merging (KSM) of the sandboxes' runtime processes: less host memory per idle
     * sandbox, at the cost of a timing side channel between sandboxes (off by default).
     */
    mergePages: Type.Boolean(),
  }),
  orchestrator: Type.Object({
    defaultSandboxTimeoutSecs: Type.Integer({ minimum: 1, maximum: 86_400 * 30 }),
    maxSandboxes: Type.Integer({ minimum: 1 }),
    maxConcurrentStarts: Type.Integer({ minimum: 1 }),
    /** Nominal sandbox memory (their memoryMB) may reach this many times host memory. */
    memoryOvercommit: Type.Number({ minimum: 1, maximum: 100 }),
    /** Measured sandbox memory beyond which idle sandboxes are paused; 0: host memory only. */
    memoryLimitMb: Type.Integer({ minimum: 0 }),
    /** A running sandbox without traffic, calls or open commands this long is frozen; 0: never. */
    idleFreezeSecs: Type.Integer({ minimum: 0, maximum: 86_400 }),
    /**
     * Busier than this (its host processes' CPU, in % of one core, over the last seconds) a
     * sandbox is not idle, requests or not: a job left running in it keeps running. 0: requests
     * alone decide.
     */
    idleFreezeCpuPct: Type.Number({ minimum: 0, maximum: 100_000 }),
  }),
  fork: Type.Object({ maxChildren: Type.Integer({ minimum: 1, maximum: 1024 }) }),
  pool: Type.Object({ size: Type.Integer({ minimum: 0, maximum: 1024 }) }),
  sandboxProxy: Type.Object({ domains: Type.Array(Type.String({ minLength: 1 })) }),
  snapshot: Type.Object({
    repositoryBackend: Type.Union([Type.Literal('posix_fs'), Type.Literal('oss')]),
    /** Where this node rebuilds snapshots for restores (bounded, least recently used evicted). */
    localCachePath: Type.String(),
    cacheCapacityGb: Type.Number({ exclusiveMinimum: 0 }),
  }),
  backend: Type.Object({
    posixFs: Type.Object({ snapshotStore: Type.String() }),
    oss: Type.Optional(
      Type.Object({
        endpoint: Type.Optional(Type.String()),
        bucket: Type.String({ minLength: 1 }),
        region: Type.Optional(Type.String()),
        prefix: Type.Optional(Type.String()),
        addressingStyle: Type.Optional(Type.Union([Type.Literal('path'), Type.Literal('virtual')])),
        accessKeyId: Type.Optional(Type.String()),
        accessKeySecret: Type.Optional(Type.String()),
        credentialProcess: Type.Optional(Type.String()),
      }),
    ),
  }),
  /** What one image pull may unpack: a small blob can inflate to any size (see limits.ts in @agentenv/oci). */
  image: Type.Object({
    maxLayerMb: Type.Integer({ minimum: 1 }),
    maxLayerEntries: Type.Integer({ minimum: 1 }),
    maxImageMb: Type.Integer({ minimum: 1 }),
    maxImageEntries: Type.Integer({ minimum: 1 }),
  }),
  /** Event streams (the dashboard's): open at once in all and per API key, unread bytes kept per stream. */
  streams: Type.Object({
    maxOpen: Type.Integer({ minimum: 1 }),
    maxPerKey: Type.Integer({ minimum: 1 }),
    maxBufferedKb: Type.Integer({ minimum: 1 }),
  }),
  /** Volumes: one directory each under `path` (a shared posix_fs path in a cluster). */
  volumes: Type.Object({ path: Type.String(), quotaMb: Type.Integer({ minimum: 1 }) }),
  network: Type.Object({
    alwaysDeniedCidrs: Type.Array(Cidr),
    /** Host-side addresses of this node's sandboxes; two nodes on one machine need different ranges. */
    hostRange: Cidr,
    /** Tag in this node's namespace, link and chain names; unique per node process on a machine. */
    nodeTag: Type.String({ pattern: '^[a-z0-9]{1,6}$' }),
  }),
  /** Node-to-node chunk exchange over iroh (off by default; see @agentenv/p2p). */
  p2p: Type.Object({
    enabled: Type.Boolean(),
    /** `ip:port` sockets the endpoint binds (one per address family at most). */
    bindAddrs: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: 2 }),
    /** Static peers, `<endpoint id>@<ip:port>[,<ip:port>…]`, used without a scheduler. */
    peers: Type.Array(Type.String({ minLength: 1 })),
    perPeerLimit: Type.Integer({ minimum: 1, maximum: 256 }),
    requestTimeoutMs: Type.Integer({ minimum: 100, maximum: 600_000 }),
    /** How long a peer that failed or sent wrong bytes is left out. */
    penaltySecs: Type.Integer({ minimum: 0, maximum: 86_400 }),
  }),
  nodeIdentity: Type.Object({
    nodeId: Type.String({ minLength: 1 }),
    clusterId: Type.String({ minLength: 1 }),
  }),
  /** With a scheduler URL the node joins that cluster; without, it runs on its own. */
  cluster: Type.Object({
    schedulerUrl: Type.Optional(Type.String({ pattern: '^https?://' })),
    /** Where the gateway reaches this node; default `http://<api_addr>`. */
    advertiseUrl: Type.Optional(Type.String({ pattern: '^https?://' })),
  }),
});

export type NodeConfig = Static<typeof NodeConfigSchema>;

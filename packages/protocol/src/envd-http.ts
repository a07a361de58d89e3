// envd's plain HTTP bodies (beside its Connect services in gen/): what the node sends and what
// envd answers, so both sides compile against one declaration.

/**
 * POST /init: the sandbox's environment and access token from the node. envd takes each field
 * as optional (a body from E2B's SDK may hold any subset); the node always sends the variables and
 * a timestamp, which makes envd ignore an older /init that arrives late.
 */
export interface EnvdInit {
  envVars: Record<string, string>;
  accessToken?: string;
  defaultUser?: string;
  defaultWorkdir?: string;
  /**
   * ISO-8601, the node's clock: an /init older than the last one applied is ignored. Absent: applied
   * whatever came before (a warm pool's /init, which the handout's then replaces).
   */
  timestamp?: string;
  /** A fresh /proc/sys/kernel/random/boot_id, for a sandbox that starts fresh. */
  bootId?: string;
  /** Volumes to bind at their paths, from beneath VOLUMES_SANDBOX_PATH. */
  volumeMounts?: EnvdVolumeMount[];
}

/** A volume under VOLUMES_SANDBOX_PATH/`name`, to be seen at `path` (absolute). */
export interface EnvdVolumeMount {
  name: string;
  path: string;
}

/** GET /metrics: one sample of the sandbox's usage as envd sees it (bytes, percent, unix seconds). */
export interface EnvdMetrics {
  ts: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_total: number;
  mem_used: number;
  /** Absent from an envd older than the field: a sandbox resumed from a capture keeps the envd it was captured with. */
  mem_cache?: number;
  disk_used: number;
  disk_total: number;
}

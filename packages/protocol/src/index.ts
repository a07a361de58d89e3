export * from './gen/process/process_pb.js';
export * from './gen/filesystem/filesystem_pb.js';

/** The port envd listens on inside every sandbox (E2B's envd port; SDKs and proxies address it). */
export const ENVD_PORT = 49983;
export type { EnvdInit, EnvdMetrics, EnvdVolumeMount } from './envd-http.js';

/**
 * Where a sandbox sees the volumes it was given, each as a directory named after it (root's
 * only): the node binds them there on the host at restore, envd binds each at its paths inside.
 */
export const VOLUMES_SANDBOX_PATH = '/.aenv-volumes';

/**
 * On a node's answer to a pause: `true` once the pause is in the snapshot repository (any node
 * sharing it can resume the sandbox), `false` while it is on that node's disk only.
 */
export const PAUSE_STORED_HEADER = 'x-aenv-pause-stored';

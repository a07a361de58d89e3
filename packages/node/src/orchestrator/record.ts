import type { EgressRules } from '../network/index.js';
import type { SandboxHandle } from '../runtime/index.js';
import type { SandboxState } from './states.js';

/** Everything the node keeps about one sandbox; persisted so paused sandboxes survive restarts. */
export interface SandboxRecord {
  sandboxId: string;
  templateId: string;
  alias?: string;
  state: SandboxState;
  startedAt: string;
  endAt: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  /** TTL expiry pauses (true) or kills (false). */
  autoPause: boolean;
  /** Proxy traffic to a paused sandbox resumes it. */
  autoResume: boolean;
  secure: boolean;
  /** The envd access token, when secure (HMAC of the id with the node secret; kept for re-init). */
  envdAccessToken?: string;
  egress: EgressRules;
  allowPublicTraffic: boolean;
  trafficAccessToken?: string;
  envdVersion: string;
  /** Volumes bind-mounted into it (they stay in its captures, so pause/resume and forks keep them). */
  volumeMounts?: { name: string; path: string }[];
  /** The live runtime sandbox, while running. */
  handle?: SandboxHandle;
  /** Directory of a local capture holding its state, while paused (absent once it moved to the cache). */
  captureDir?: string;
  /**
   * Its newest pause in the snapshot repository, whose claim this node holds: the state to
   * resume from while paused, and the parent of the next pause while running.
   */
  pauseId?: string;
}

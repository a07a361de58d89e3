import type { SandboxSettings } from '../orchestrator/index.js';

/**
 * The create body (POST /sandboxes) that a node reads back as exactly these settings: how a
 * fork's child is started on another node, from a snapshot of its parent.
 */
export function createBodyOf(s: SandboxSettings) {
  return {
    timeout: s.timeoutSecs,
    metadata: s.metadata,
    envVars: s.envVars,
    autoPause: s.autoPause,
    autoPauseMemory: s.autoPauseMemory,
    autoResume: { enabled: s.autoResume },
    secure: s.secure,
    allow_internet_access: s.egress.allowInternet,
    network: {
      allowOut: s.egress.allowOut,
      denyOut: s.egress.denyOut,
      allowPublicTraffic: s.allowPublicTraffic,
      ...(s.maskRequestHost ? { maskRequestHost: s.maskRequestHost } : {}),
    },
  };
}

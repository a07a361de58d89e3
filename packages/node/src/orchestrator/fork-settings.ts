import type { CreateSandboxInput } from './create.js';
import type { SandboxRecord } from './record.js';

/** A sandbox's settings, everything of a create but what it starts from. */
export type SandboxSettings = Omit<CreateSandboxInput, 'source' | 'volumeMounts'>;

/**
 * What a fork's child is created with, wherever it starts: its parent's network rules, lifecycle,
 * metadata, variables and security, and the time the parent has left (or `timeoutSecs`).
 */
export function forkChildSettings(
  parent: SandboxRecord,
  timeoutSecs: number | undefined,
  nowMs: number,
): SandboxSettings {
  const left = Math.ceil((Date.parse(parent.endAt) - nowMs) / 1000);
  return {
    timeoutSecs: timeoutSecs ?? Math.max(1, left),
    metadata: parent.metadata,
    envVars: parent.envVars,
    autoPause: parent.autoPause,
    autoPauseMemory: parent.autoPauseMemory ?? true,
    autoResume: parent.autoResume,
    secure: parent.secure,
    egress: parent.egress,
    allowPublicTraffic: parent.allowPublicTraffic,
    ...(parent.maskRequestHost ? { maskRequestHost: parent.maskRequestHost } : {}),
  };
}

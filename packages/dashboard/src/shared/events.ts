import type { SandboxEvent } from './types.js';

type Raw = Record<string, unknown>;

const str = (...vs: unknown[]): string => {
  for (const v of vs) if (typeof v === 'string' && v) return v;
  return '';
};

/**
 * A lifecycle event from a node (`sandboxID`, `nodeID`, `timestamp`) or from a gateway, which
 * passes on the cluster scheduler's (`sandboxId`, `nodeId`, `time`), in the one shape the views
 * show. Only string details are kept.
 */
export function toSandboxEvent(raw: Raw): SandboxEvent {
  const details: Record<string, string> = {};
  if (raw.details && typeof raw.details === 'object')
    for (const [k, v] of Object.entries(raw.details as Raw)) if (typeof v === 'string') details[k] = v;
  const reason = str(raw.reason);
  return {
    sandboxID: str(raw.sandboxID, raw.sandboxId),
    nodeID: str(raw.nodeID, raw.nodeId),
    type: str(raw.type) || 'unknown',
    timestamp: str(raw.timestamp, raw.time),
    ...(reason ? { reason } : {}),
    ...(Object.keys(details).length ? { details } : {}),
  };
}

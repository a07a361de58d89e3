import { createHmac } from 'node:crypto';

/** A sandbox's envd token: derived, so the node can recompute it after a restart. */
export function envdAccessToken(nodeSecret: string, sandboxId: string): string {
  return createHmac('sha256', nodeSecret).update(`envd:${sandboxId}`).digest('hex');
}

export function trafficAccessToken(nodeSecret: string, sandboxId: string): string {
  return createHmac('sha256', nodeSecret).update(`traffic:${sandboxId}`).digest('hex').slice(0, 32);
}

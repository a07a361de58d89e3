import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BootId } from '../boot-id.js';
import { checkVolumeMounts, type VolumeBinds } from '../volumes.js';
import { invalidArgument, unauthenticated } from '../errors.js';
import type { EnvdInit } from '@agentenv/protocol';
import type { EnvdState } from '../state.js';
import { readJson, sendJson } from './respond.js';
import type { SystemMetrics } from '../metrics.js';

/**
 * POST /init: the node hands over sandbox-wide settings. Once a token is set, only a caller
 * that knows it may change them, so a process inside the sandbox cannot take envd over.
 */
export async function handleInit(
  req: IncomingMessage,
  res: ServerResponse,
  state: EnvdState,
  bootId: BootId,
  volumes: VolumeBinds,
): Promise<void> {
  if (!state.tokenAccepted(req.headers['x-access-token'] as string | undefined)) {
    throw unauthenticated('unauthorized access, please provide a valid access token');
  }
  const body = await readJson(req);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidArgument('init body must be a JSON object');
  }
  const init = body as Partial<EnvdInit>;
  const mounts = checkVolumeMounts(init.volumeMounts);
  if (!state.init(init)) return void res.writeHead(204).end();
  if (init.bootId) bootId.set(init.bootId);
  volumes.bind(mounts);
  res.writeHead(204).end();
}

export function handleEnvs(res: ServerResponse, state: EnvdState): void {
  sendJson(res, 200, state.envVars);
}

export async function handleMetrics(res: ServerResponse, metrics: SystemMetrics): Promise<void> {
  sendJson(res, 200, await metrics.sample());
}

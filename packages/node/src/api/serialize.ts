import { pauseStored, visibleState, type SandboxRecord } from '../orchestrator/index.js';

/** The E2B `Sandbox` object returned by create and connect. */
export function sandboxBody(rec: SandboxRecord, domain: string | undefined) {
  return {
    sandboxID: rec.sandboxId,
    clientID: '',
    templateID: rec.templateId,
    ...(rec.alias ? { alias: rec.alias } : {}),
    envdVersion: rec.envdVersion,
    ...(rec.envdAccessToken ? { envdAccessToken: rec.envdAccessToken } : {}),
    ...(rec.trafficAccessToken ? { trafficAccessToken: rec.trafficAccessToken } : {}),
    domain: domain ?? null,
  };
}

/** The E2B `ListedSandbox` object of list endpoints. */
export function listedBody(rec: SandboxRecord) {
  return {
    sandboxID: rec.sandboxId,
    clientID: '',
    templateID: rec.templateId,
    ...(rec.alias ? { alias: rec.alias } : {}),
    startedAt: rec.startedAt,
    endAt: rec.endAt,
    state: visibleState(rec.state),
    cpuCount: rec.cpuCount,
    memoryMB: rec.memoryMB,
    diskSizeMB: rec.diskSizeMB,
    envdVersion: rec.envdVersion,
    metadata: rec.metadata,
  };
}

/** GET /sandboxes/{id}: the listed fields plus access and lifecycle details. */
export function detailBody(rec: SandboxRecord, domain: string | undefined) {
  return {
    ...listedBody(rec),
    domain: domain ?? null,
    ...(rec.envdAccessToken ? { envdAccessToken: rec.envdAccessToken } : {}),
    allowInternetAccess: rec.egress.allowInternet,
    network: {
      allowOut: rec.egress.allowOut,
      denyOut: rec.egress.denyOut,
      allowPublicTraffic: rec.allowPublicTraffic,
      ...(rec.maskRequestHost ? { maskRequestHost: rec.maskRequestHost } : {}),
    },
    lifecycle: { onTimeout: rec.autoPause ? 'pause' : 'kill', autoResume: rec.autoResume },
    volumeMounts: rec.volumeMounts ?? [],
    // While paused: whether another node could resume it (false: on this node's disk only).
    ...(visibleState(rec.state) === 'paused' ? { pauseStored: pauseStored(rec) } : {}),
  };
}

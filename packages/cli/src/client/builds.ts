import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { CliError } from '../errors.js';
import { tarEntries, type ContextFile } from '../lib/build-context.js';
import { writeTarGz } from '../lib/tar.js';
import type { ApiClient } from './api.js';
import type { BuildLogEntry, BuildSpec, BuildStatus, Template, TemplateBuildRequest } from './types.js';

const FEATURE = 'template builds (POST /v3/templates)';

/** POST /v3/templates: registers the build of a (new or existing) template name. */
export async function requestBuild(
  api: ApiClient,
  body: { name: string; cpuCount?: number; memoryMB?: number },
): Promise<TemplateBuildRequest> {
  const res = await api.post<TemplateBuildRequest>('/v3/templates', body, { feature: FEATURE });
  if (!res.data?.templateID || !res.data.buildID)
    throw new CliError('unexpected answer from POST /v3/templates: no templateID/buildID');
  return res.data;
}

/**
 * Sends the files of one COPY step unless the server has them already (E2B's files endpoint
 * answers `{present, url}`; the archive is PUT to `url`). Returns whether it uploaded.
 */
export async function uploadStepFiles(
  api: ApiClient,
  templateID: string,
  hash: string,
  files: ContextFile[],
): Promise<boolean> {
  const link = await api.get<{ present: boolean; url?: string; headers?: Record<string, string> }>(
    `/templates/${encodeURIComponent(templateID)}/files/${hash}`,
    { feature: 'template file uploads' },
  );
  if (link.present || !link.url) return false;
  const dir = await mkdtemp(path.join(tmpdir(), 'aenv-build-'));
  try {
    const archive = path.join(dir, `context-${randomBytes(4).toString('hex')}.tar.gz`);
    await writeTarGz(tarEntries(files), archive);
    const { size } = await stat(archive);
    const url = new URL(link.url, api.baseUrl);
    const sameOrigin = url.origin === new URL(api.baseUrl).origin;
    const res = await fetch(url, {
      method: 'PUT',
      headers: {
        ...(link.headers ?? {}),
        'content-length': String(size),
        'content-type': 'application/gzip',
        ...(sameOrigin ? { 'x-api-key': api.creds.apiKey } : {}),
      },
      body: Readable.toWeb(createReadStream(archive)) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
    if (!res.ok) throw new CliError(`upload of build files failed: HTTP ${res.status} ${await res.text()}`);
    return true;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** POST /v2/templates/{id}/builds/{buildID}: starts the build. */
export async function triggerBuild(
  api: ApiClient,
  templateID: string,
  buildID: string,
  spec: BuildSpec,
): Promise<void> {
  await api.post(
    `/v2/templates/${encodeURIComponent(templateID)}/builds/${encodeURIComponent(buildID)}`,
    spec,
    { feature: FEATURE },
  );
}

export interface FollowHandlers {
  onLog(entry: BuildLogEntry): void;
  onStatus(status: BuildStatus['status']): void;
}

/** Polls the build status, handing new log entries over, until the build is ready or failed. */
export async function followBuild(
  api: ApiClient,
  templateID: string,
  buildID: string,
  handlers: FollowHandlers,
  intervalMs = 1000,
): Promise<BuildStatus> {
  let offset = 0;
  for (;;) {
    const st = await api.get<BuildStatus>(
      `/templates/${encodeURIComponent(templateID)}/builds/${encodeURIComponent(buildID)}/status`,
      { query: { logsOffset: offset }, feature: 'template build status' },
    );
    const entries = st.logEntries ?? [];
    for (const e of entries) handlers.onLog(e);
    offset += entries.length;
    handlers.onStatus(st.status);
    if ((st.status === 'ready' || st.status === 'error') && entries.length === 0) return st;
    if (st.status !== 'ready' && st.status !== 'error') await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Resolves a template name (alias) to its id; an unknown name is returned as is (maybe an id). */
export async function resolveTemplateId(api: ApiClient, idOrName: string): Promise<string> {
  try {
    const found = await api.get<{ templateID: string }>(`/templates/aliases/${encodeURIComponent(idOrName)}`);
    return found.templateID ?? idOrName;
  } catch (err) {
    if ((err as { status?: number }).status === 404) return idOrName;
    throw err;
  }
}

export async function getTemplate(api: ApiClient, id: string): Promise<Template> {
  return api.get<Template>(`/templates/${encodeURIComponent(id)}`, {
    feature: 'templates (GET /templates/{id})',
  });
}

import { createReadStream, createWriteStream } from 'node:fs';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Code, ConnectError, createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ENVD_PORT, Filesystem, Process } from '@agentenv/protocol';
import { CliError } from '../errors.js';
import type { ApiClient } from './api.js';
import type { Sandbox, SandboxDetail } from './types.js';

/** How to reach one sandbox's envd through the node (or gateway) on the API's own origin. */
export interface SandboxTarget {
  sandboxID: string;
  baseUrl: string;
  accessToken?: string;
}

export function targetOf(api: ApiClient, sbx: Sandbox | SandboxDetail): SandboxTarget {
  return {
    sandboxID: sbx.sandboxID,
    baseUrl: api.baseUrl,
    ...(sbx.envdAccessToken ? { accessToken: sbx.envdAccessToken } : {}),
  };
}

/** Routing and auth headers for the data plane; `user` selects the sandbox user (Basic auth). */
export function envdHeaders(target: SandboxTarget, user?: string): Record<string, string> {
  return {
    'e2b-sandbox-id': target.sandboxID,
    'e2b-sandbox-port': String(ENVD_PORT),
    ...(target.accessToken ? { 'x-access-token': target.accessToken } : {}),
    ...(user ? { authorization: `Basic ${Buffer.from(`${user}:`).toString('base64')}` } : {}),
  };
}

function transportFor(target: SandboxTarget, user?: string) {
  const headers = envdHeaders(target, user);
  const addHeaders: Interceptor = (next) => async (req) => {
    for (const [k, v] of Object.entries(headers)) req.header.set(k, v);
    return next(req);
  };
  return createConnectTransport({
    baseUrl: target.baseUrl,
    httpVersion: '1.1',
    useBinaryFormat: true,
    interceptors: [addHeaders],
  });
}

export type ProcessClient = Client<typeof Process>;
export type FilesystemClient = Client<typeof Filesystem>;

export function processClient(target: SandboxTarget, user?: string): ProcessClient {
  return createClient(Process, transportFor(target, user));
}

export function filesystemClient(target: SandboxTarget, user?: string): FilesystemClient {
  return createClient(Filesystem, transportFor(target, user));
}

/** A Connect error from envd (or the proxy in front of it) as a message for the user. */
export function envdError(err: unknown, target: SandboxTarget, what?: string): CliError {
  if (err instanceof CliError) return err;
  const prefix = what ? `${what}: ` : '';
  if (err instanceof ConnectError) {
    if (err.code === Code.Unauthenticated || err.code === Code.PermissionDenied)
      return new CliError(`${prefix}access to sandbox ${target.sandboxID} was denied (${err.rawMessage})`);
    if (/^HTTP 50[234]$/.test(err.rawMessage) || err.code === Code.Unavailable)
      return new CliError(`${prefix}sandbox ${target.sandboxID} is not reachable (${err.rawMessage})`);
    return new CliError(`${prefix}${err.rawMessage}`);
  }
  return new CliError(`${prefix}${(err as Error).message ?? String(err)}`);
}

/**
 * Like envdError, but for a proxy error (HTTP 502: the RPC error carries no body) asks the proxy
 * once more through envd's /health, whose answer says why (sandbox gone, connection refused...).
 */
export async function explainEnvdError(
  err: unknown,
  target: SandboxTarget,
  what?: string,
): Promise<CliError> {
  const base = envdError(err, target, what);
  if (!(err instanceof ConnectError) || !/^HTTP 50[234]$/.test(err.rawMessage)) return base;
  try {
    const res = await fetch(`${target.baseUrl}/health`, {
      headers: envdHeaders(target),
      signal: AbortSignal.timeout(5000),
    });
    if (res.ok) return new CliError(`${base.message}; it answers again now, retry the command`);
    const body = (await res.json().catch(() => ({}))) as { message?: string };
    if (body.message)
      return new CliError(`${what ? `${what}: ` : ''}sandbox ${target.sandboxID}: ${body.message}`);
  } catch {
    // keep the first message
  }
  return base;
}

/** Fetches a sandbox and checks it can take data-plane calls (running, not paused). */
export async function runningSandbox(api: ApiClient, id: string): Promise<SandboxTarget> {
  const sbx = await api.get<SandboxDetail>(`/sandboxes/${encodeURIComponent(id)}`);
  if (sbx.state === 'paused') {
    throw new CliError(`sandbox ${id} is paused`, 1, `Resume it first: aenv resume ${id}`);
  }
  return targetOf(api, sbx);
}

/** Runs a program (no shell) to completion; resolves with its exit code and stderr. */
export async function runProgram(
  target: SandboxTarget,
  cmd: string,
  args: string[],
  user?: string,
): Promise<{ exitCode: number; stderr: string }> {
  const client = processClient(target, user);
  let stderr = '';
  try {
    for await (const res of client.start({ process: { cmd, args, envs: {} }, stdin: false })) {
      const ev = res.event?.event;
      if (ev?.case === 'data' && ev.value.output.case === 'stderr')
        stderr += Buffer.from(ev.value.output.value).toString();
      if (ev?.case === 'end') return { exitCode: ev.value.exitCode, stderr };
    }
  } catch (err) {
    throw await explainEnvdError(err, target, cmd);
  }
  throw new CliError(`${cmd}: the sandbox ended the stream before the program exited`);
}

interface HttpOptions {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: Readable;
}

function send(url: URL, opts: HttpOptions): Promise<IncomingMessage> {
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(url, { method: opts.method, headers: opts.headers }, resolve);
    req.on('error', reject);
    if (opts.body) {
      opts.body.on('error', (err) => req.destroy(err));
      opts.body.pipe(req);
    } else req.end();
  });
}

async function readAll(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function failure(res: IncomingMessage, what: string): Promise<CliError> {
  const text = await readAll(res).catch(() => '');
  let message = text.trim();
  try {
    const body = JSON.parse(text) as { message?: string };
    if (body.message) message = body.message;
  } catch {
    // not JSON: keep the text
  }
  return new CliError(`${what}: ${message || `HTTP ${res.statusCode}`}`);
}

function filesUrl(target: SandboxTarget, remotePath: string, user?: string): URL {
  const url = new URL(`${target.baseUrl}/files`);
  url.searchParams.set('path', remotePath);
  if (user) url.searchParams.set('username', user);
  return url;
}

/** Counts bytes as they pass. */
function meter(onBytes: (n: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      onBytes(chunk.length);
      cb(null, chunk);
    },
  });
}

/** Uploads one local file to `remotePath` (parents are created by envd). */
export async function uploadFile(
  target: SandboxTarget,
  localPath: string,
  size: number,
  remotePath: string,
  opts: { user?: string; onBytes?: (n: number) => void } = {},
): Promise<void> {
  const body = createReadStream(localPath).pipe(meter(opts.onBytes ?? (() => undefined)));
  let res: IncomingMessage;
  try {
    res = await send(filesUrl(target, remotePath, opts.user), {
      method: 'POST',
      headers: {
        ...envdHeaders(target, opts.user),
        'content-type': 'application/octet-stream',
        'content-length': String(size),
      },
      body,
    });
  } catch (err) {
    throw new CliError(`upload of ${localPath} failed: ${(err as Error).message}`);
  }
  if (res.statusCode !== 200 && res.statusCode !== 201 && res.statusCode !== 204)
    throw await failure(res, `upload to ${remotePath} failed`);
  res.resume();
}

/** Downloads `remotePath` into the local file `localPath` (the caller renames it into place). */
export async function downloadFile(
  target: SandboxTarget,
  remotePath: string,
  localPath: string,
  opts: { user?: string; onBytes?: (n: number) => void } = {},
): Promise<void> {
  let res: IncomingMessage;
  try {
    res = await send(filesUrl(target, remotePath, opts.user), {
      method: 'GET',
      headers: { ...envdHeaders(target, opts.user), 'accept-encoding': 'identity' },
    });
  } catch (err) {
    throw new CliError(`download of ${remotePath} failed: ${(err as Error).message}`);
  }
  if (res.statusCode !== 200) throw await failure(res, `download of ${remotePath} failed`);
  await pipeline(
    res,
    meter(opts.onBytes ?? (() => undefined)),
    createWriteStream(localPath, { flags: 'wx' }),
  );
}

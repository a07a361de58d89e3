import type { DescService } from '@bufbuild/protobuf';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Process } from '@agentenv/protocol';
import { FreshConnectionAgent, requestOnce, type SizedBody } from '../util/index.js';

export interface EnvdInit {
  envVars: Record<string, string>;
  accessToken?: string;
  defaultUser?: string;
  defaultWorkdir?: string;
  timestamp: string;
  /** A fresh /proc/sys/kernel/random/boot_id, for a sandbox that starts fresh. */
  bootId?: string;
}

/**
 * envd's default user and working directory from a template's, image's or build's settings;
 * absent ones are left as envd has them.
 */
export function initDefaults(d: { user?: string; workdir?: string } = {}): Partial<EnvdInit> {
  return { ...(d.user ? { defaultUser: d.user } : {}), ...(d.workdir ? { defaultWorkdir: d.workdir } : {}) };
}

export interface EnvdMetrics {
  ts: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_total: number;
  mem_used: number;
  mem_cache?: number;
  disk_used: number;
  disk_total: number;
}

/** A command run through envd as a user, in a directory, with variables. */
export interface ExecRequest {
  readonly cmd: string;
  readonly user: string;
  /** Runs `cmd` with `-c`; /bin/sh unless given. */
  readonly shell?: string;
  readonly cwd?: string;
  readonly envs?: Readonly<Record<string, string>>;
  /** Each chunk of stdout/stderr as it arrives. */
  readonly onOutput?: (text: string, stream: 'stdout' | 'stderr') => void;
  /** Resolve as soon as the process has started, leaving it running (a start command). */
  readonly detach?: boolean;
  /** Longest silence on the stream (envd pings every 30 s while the command runs). */
  readonly timeoutMs?: number;
  /** The sandbox's envd access token, when it has one. */
  readonly token?: string;
}

const tokenHeader = (token: string | undefined): Record<string, string> =>
  token ? { 'x-access-token': token } : {};

const basic = (user: string) => `Basic ${Buffer.from(`${user}:`).toString('base64')}`;
const decoder = new TextDecoder();

/**
 * The node's calls to one sandbox's envd, at the host-side address it dials. Every call has a
 * connection of its own that this side resets once the answer is in (FreshConnectionAgent): the
 * sandbox must hold no established connection, nor a TIME_WAIT, when it is checkpointed.
 */
export class EnvdClient {
  constructor(
    readonly host: string,
    readonly port: number,
    /** Longest silence on a control call (/init, /metrics, files). */
    private readonly timeoutMs = 10_000,
  ) {}

  /** A generated Connect client of one of envd's services, each call on a fresh connection. */
  connectClient<T extends DescService>(service: T, timeoutMs = this.timeoutMs): Client<T> {
    const transport = createConnectTransport({
      baseUrl: `http://${this.host}:${this.port}`,
      httpVersion: '1.1',
      useBinaryFormat: true,
      nodeOptions: { agent: new FreshConnectionAgent(timeoutMs) },
    });
    return createClient(service, transport);
  }

  private call(
    method: string,
    path: string,
    opts: { headers?: Record<string, string>; body?: Buffer | SizedBody; timeoutMs?: number } = {},
  ): Promise<{ status: number; body: Buffer }> {
    return requestOnce({
      host: this.host,
      port: this.port,
      method,
      path,
      timeoutMs: opts.timeoutMs ?? this.timeoutMs,
      ...(opts.headers ? { headers: opts.headers } : {}),
      ...(opts.body ? { body: opts.body } : {}),
    });
  }

  /** The status of GET /health. */
  async health(timeoutMs = 2000): Promise<number> {
    return (await this.call('GET', '/health', { timeoutMs })).status;
  }

  /** POST /init: ids, tokens and env vars for a sandbox just created; `currentToken` is the one set inside. */
  async init(init: EnvdInit, currentToken?: string): Promise<void> {
    const r = await this.call('POST', '/init', {
      headers: {
        'content-type': 'application/json',
        ...tokenHeader(currentToken),
      },
      body: Buffer.from(JSON.stringify(init)),
    });
    if (r.status !== 204 && r.status !== 200)
      throw new Error(`envd /init answered ${r.status}: ${r.body.toString()}`);
  }

  async metrics(token?: string): Promise<EnvdMetrics> {
    const r = await this.call('GET', '/metrics', { headers: tokenHeader(token) });
    if (r.status !== 200) throw new Error(`envd /metrics answered ${r.status}: ${r.body.toString()}`);
    return JSON.parse(r.body.toString()) as EnvdMetrics;
  }

  /** Runs a command to completion (or until it started, with `detach`); returns its exit code. */
  async exec(r: ExecRequest): Promise<number> {
    const process = this.connectClient(Process, r.timeoutMs ?? 120_000);
    const stream = process.start(
      {
        process: {
          cmd: r.shell ?? '/bin/sh',
          args: ['-c', r.cmd],
          envs: { ...r.envs },
          ...(r.cwd ? { cwd: r.cwd } : {}),
        },
      },
      {
        headers: { authorization: basic(r.user), 'keepalive-ping-interval': '30', ...tokenHeader(r.token) },
      },
    );
    let exitCode = -1;
    for await (const { event } of stream) {
      const ev = event?.event;
      // Leaving the loop ends the call (and the connection); the process runs on.
      if (ev?.case === 'start' && r.detach) return exitCode;
      const out = ev?.case === 'data' ? ev.value.output : undefined;
      if (out?.case === 'stdout' || out?.case === 'stderr') r.onOutput?.(decoder.decode(out.value), out.case);
      if (ev?.case === 'end') exitCode = ev.value.exitCode;
    }
    return exitCode;
  }

  /** Writes a file (parents created, owned by `user`); a SizedBody is sent as it is read. */
  async writeFile(path: string, data: Buffer | SizedBody, user: string, token?: string): Promise<void> {
    const r = await this.call('POST', `/files?${fileQuery(path, user)}`, {
      headers: { 'content-type': 'application/octet-stream', ...tokenHeader(token) },
      body: data,
      timeoutMs: 60_000,
    });
    if (r.status !== 200) throw new Error(`envd writing ${path}: HTTP ${r.status} ${r.body.toString()}`);
  }

  /** A file's bytes, or undefined when it does not exist. */
  async readFile(path: string, user = 'root', token?: string): Promise<Buffer | undefined> {
    const r = await this.call('GET', `/files?${fileQuery(path, user)}`, {
      timeoutMs: 30_000,
      headers: tokenHeader(token),
    });
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw new Error(`envd reading ${path}: HTTP ${r.status} ${r.body.toString()}`);
    return r.body;
  }
}

const fileQuery = (path: string, user: string) =>
  `path=${encodeURIComponent(path)}&username=${encodeURIComponent(user)}`;

/** What the node's parts use of a sandbox's envd; tests can stand in for it. */
export type EnvdApi = Pick<EnvdClient, 'health' | 'init' | 'metrics' | 'exec' | 'writeFile' | 'readFile'>;

/** The envd of the sandbox reached at `host:port`. */
export type EnvdConnector = (host: string, port: number) => EnvdApi;

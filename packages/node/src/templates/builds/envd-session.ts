import { request, type IncomingMessage } from 'node:http';

/** What a build step runs through envd: a command as a user, in a directory, with variables. */
export interface ExecRequest {
  readonly cmd: string;
  readonly user: string;
  readonly cwd?: string;
  readonly envs?: Readonly<Record<string, string>>;
  /** Each chunk of stdout/stderr as it arrives. */
  readonly onOutput?: (text: string, stream: 'stdout' | 'stderr') => void;
  /** Resolve as soon as the process has started, leaving it running (a start command). */
  readonly detach?: boolean;
  readonly timeoutMs?: number;
}

interface ProcessEvent {
  event?: {
    start?: { pid?: number };
    data?: { stdout?: string; stderr?: string };
    end?: { exitCode?: number; status?: string; error?: string };
  };
  error?: { message?: string };
}

const basic = (user: string) => `Basic ${Buffer.from(`${user}:`).toString('base64')}`;

/**
 * The node's side of a build sandbox's envd: processes (Connect server streams, JSON codec) and
 * files. Every call has its own connection that is reset once the answer is in: gVisor refuses to
 * checkpoint a sandbox holding an established connection, and the build ends in a checkpoint.
 */
export class EnvdSession {
  constructor(
    readonly address: string,
    readonly port: number,
  ) {}

  private open(
    method: string,
    path: string,
    headers: Record<string, string | number>,
    body: Buffer,
    timeoutMs: number,
    onResponse: (res: IncomingMessage, done: (err?: Error) => void) => void,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const req = request(
        {
          host: this.address,
          port: this.port,
          method,
          path,
          agent: false,
          timeout: timeoutMs,
          headers: { ...headers, 'content-length': body.length, connection: 'keep-alive' },
        },
        (res) => {
          // Taken now: once the response ends, the socket is detached from it.
          const socket = res.socket;
          onResponse(res, (err) => {
            if (settled) return;
            settled = true;
            if (!socket.destroyed) socket.resetAndDestroy();
            if (err) reject(err);
            else resolve();
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`envd ${path} timed out after ${timeoutMs} ms`)));
      req.on('error', (e) => {
        if (!settled) reject(e);
        settled = true;
      });
      req.end(body);
    });
  }

  /** Runs a command to completion (or until it started, with `detach`); returns its exit code. */
  async exec(r: ExecRequest): Promise<number> {
    const msg = Buffer.from(
      JSON.stringify({
        process: {
          cmd: '/bin/sh',
          args: ['-c', r.cmd],
          envs: r.envs ?? {},
          ...(r.cwd ? { cwd: r.cwd } : {}),
        },
      }),
    );
    const frame = Buffer.alloc(5 + msg.length);
    frame.writeUInt32BE(msg.length, 1);
    msg.copy(frame, 5);
    let exitCode = -1;
    await this.open(
      'POST',
      '/process.Process/Start',
      {
        'content-type': 'application/connect+json',
        'connect-protocol-version': '1',
        'keepalive-ping-interval': '30',
        authorization: basic(r.user),
      },
      frame,
      r.timeoutMs ?? 120_000,
      (res, done) => {
        if (res.statusCode !== 200) return collectError(res, done, 'process start');
        let buf = Buffer.alloc(0);
        res.on('data', (chunk: Buffer) => {
          buf = Buffer.concat([buf, chunk]);
          while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
            const flags = buf.readUInt8(0);
            const len = buf.readUInt32BE(1);
            const m = JSON.parse(buf.subarray(5, 5 + len).toString()) as ProcessEvent;
            buf = buf.subarray(5 + len);
            if (flags & 2) {
              return done(
                m.error ? new Error(`envd: ${m.error.message ?? 'process stream failed'}`) : undefined,
              );
            }
            const ev = m.event;
            if (ev?.start && r.detach) return done();
            if (ev?.data?.stdout) r.onOutput?.(Buffer.from(ev.data.stdout, 'base64').toString(), 'stdout');
            if (ev?.data?.stderr) r.onOutput?.(Buffer.from(ev.data.stderr, 'base64').toString(), 'stderr');
            if (ev?.end) exitCode = ev.end.exitCode ?? 0;
          }
        });
        res.on('end', () => done());
        res.on('error', done);
      },
    );
    return exitCode;
  }

  /** Writes a file (parents created, owned by `user`). */
  async writeFile(path: string, data: Buffer, user: string): Promise<void> {
    const q = `path=${encodeURIComponent(path)}&username=${encodeURIComponent(user)}`;
    await this.open(
      'POST',
      `/files?${q}`,
      { 'content-type': 'application/octet-stream' },
      data,
      60_000,
      (res, done) => {
        if (res.statusCode !== 200) return collectError(res, done, `writing ${path}`);
        res.resume();
        res.on('end', () => done());
      },
    );
  }

  /** A file's bytes, or undefined when it does not exist. */
  async readFile(path: string): Promise<Buffer | undefined> {
    let out: Buffer | undefined;
    const q = `path=${encodeURIComponent(path)}&username=root`;
    await this.open('GET', `/files?${q}`, {}, Buffer.alloc(0), 30_000, (res, done) => {
      if (res.statusCode === 404) {
        res.resume();
        return res.on('end', () => done());
      }
      if (res.statusCode !== 200) return collectError(res, done, `reading ${path}`);
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        out = Buffer.concat(chunks);
        done();
      });
    });
    return out;
  }
}

function collectError(res: IncomingMessage, done: (err?: Error) => void, what: string): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () =>
    done(new Error(`envd ${what}: HTTP ${res.statusCode} ${Buffer.concat(chunks).toString()}`)),
  );
}

import { request } from 'node:http';

/**
 * A minimal envd client for the runtime tests, speaking the Connect JSON protocol directly.
 * Every request uses its own connection that the client resets when done: a pooled keep-alive
 * connection (as fetch keeps) or a server-side close would leave an endpoint gVisor refuses to
 * checkpoint.
 */
export interface HttpResult {
  status: number;
  body: Buffer;
}

export function httpCall(
  host: string,
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer,
  timeoutMs = 30_000,
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host,
        port,
        method,
        path,
        agent: false,
        headers: { ...headers, connection: 'keep-alive' },
        timeout: timeoutMs,
      },
      (res) => {
        // Taken now: once the response ends, the socket is detached from it.
        const socket = res.socket;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          if (!socket.destroyed) socket.resetAndDestroy();
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

export class EnvdClient {
  constructor(
    readonly host: string,
    readonly port: number,
  ) {}

  async health(timeoutMs = 2000): Promise<number> {
    return (await httpCall(this.host, this.port, 'GET', '/health', {}, undefined, timeoutMs)).status;
  }

  async stat(path: string): Promise<{ name: string; type: string }> {
    const r = await httpCall(
      this.host,
      this.port,
      'POST',
      '/filesystem.Filesystem/Stat',
      { 'content-type': 'application/json' },
      Buffer.from(JSON.stringify({ path })),
    );
    if (r.status !== 200) throw new Error(`Stat ${path}: ${r.status} ${r.body.toString()}`);
    return (JSON.parse(r.body.toString()) as { entry: { name: string; type: string } }).entry;
  }

  /** Runs a command to completion through process.Process/Start (a Connect server stream). */
  async run(cmd: string, user = 'root'): Promise<{ stdout: string; stderr: string; exitCode: number }> {
    const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/bash', args: ['-c', cmd] } }));
    const frame = Buffer.alloc(5 + msg.length);
    frame.writeUInt8(0, 0);
    frame.writeUInt32BE(msg.length, 1);
    msg.copy(frame, 5);
    const r = await httpCall(
      this.host,
      this.port,
      'POST',
      '/process.Process/Start',
      {
        'content-type': 'application/connect+json',
        'connect-protocol-version': '1',
        authorization: `Basic ${Buffer.from(`${user}:`).toString('base64')}`,
      },
      frame,
    );
    if (r.status !== 200) throw new Error(`Process/Start: ${r.status} ${r.body.toString()}`);
    let stdout = '';
    let stderr = '';
    let exitCode = -1;
    for (let off = 0; off + 5 <= r.body.length;) {
      const flags = r.body.readUInt8(off);
      const len = r.body.readUInt32BE(off + 1);
      const json = JSON.parse(r.body.subarray(off + 5, off + 5 + len).toString()) as {
        event?: { data?: { stdout?: string; stderr?: string }; end?: { exitCode?: number } };
        error?: { message?: string };
      };
      off += 5 + len;
      if (flags & 2) {
        if (json.error) throw new Error(`Process/Start stream error: ${json.error.message}`);
        continue;
      }
      const ev = json.event;
      if (ev?.data?.stdout) stdout += Buffer.from(ev.data.stdout, 'base64').toString();
      if (ev?.data?.stderr) stderr += Buffer.from(ev.data.stderr, 'base64').toString();
      if (ev?.end) exitCode = ev.end.exitCode ?? 0;
    }
    return { stdout, stderr, exitCode };
  }

  async upload(path: string, data: Buffer, user = 'root'): Promise<void> {
    const q = `path=${encodeURIComponent(path)}&username=${user}`;
    const r = await httpCall(
      this.host,
      this.port,
      'POST',
      `/files?${q}`,
      { 'content-type': 'application/octet-stream' },
      data,
    );
    if (r.status !== 200) throw new Error(`upload ${path}: ${r.status} ${r.body.toString()}`);
  }

  async download(path: string, user = 'root'): Promise<Buffer> {
    const q = `path=${encodeURIComponent(path)}&username=${user}`;
    const r = await httpCall(this.host, this.port, 'GET', `/files?${q}`, {});
    if (r.status !== 200) throw new Error(`download ${path}: ${r.status} ${r.body.toString()}`);
    return r.body;
  }
}

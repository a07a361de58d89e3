import { request } from 'node:http';

export interface EnvdInit {
  envVars: Record<string, string>;
  accessToken?: string;
  defaultUser?: string;
  defaultWorkdir?: string;
  timestamp: string;
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

/**
 * The node's calls to a sandbox's envd. Every call uses a fresh connection that the node closes
 * itself once the answer is in: gVisor cannot checkpoint a sandbox holding an established
 * external connection, and closing from our side leaves the TIME_WAIT on the host, not in the
 * sandbox.
 */
export class EnvdClient {
  constructor(private readonly timeoutMs = 10_000) {}

  private call(
    address: string,
    port: number,
    method: string,
    path: string,
    body?: unknown,
    token?: string,
  ): Promise<{ status: number; body: string }> {
    const data = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: address,
          port,
          method,
          path,
          agent: false,
          timeout: this.timeoutMs,
          headers: {
            // Not "close": that makes envd close first, leaving its side in TIME_WAIT.
            connection: 'keep-alive',
            ...(data
              ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }
              : {}),
            ...(token ? { 'x-access-token': token } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            req.destroy();
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () =>
        req.destroy(new Error(`envd ${method} ${path} timed out after ${this.timeoutMs} ms`)),
      );
      req.on('error', reject);
      req.end(data);
    });
  }

  async init(address: string, port: number, init: EnvdInit, currentToken?: string): Promise<void> {
    const r = await this.call(address, port, 'POST', '/init', init, currentToken);
    if (r.status !== 204 && r.status !== 200) throw new Error(`envd /init answered ${r.status}: ${r.body}`);
  }

  async metrics(address: string, port: number, token?: string): Promise<EnvdMetrics> {
    const r = await this.call(address, port, 'GET', '/metrics', undefined, token);
    if (r.status !== 200) throw new Error(`envd /metrics answered ${r.status}: ${r.body}`);
    return JSON.parse(r.body) as EnvdMetrics;
  }
}

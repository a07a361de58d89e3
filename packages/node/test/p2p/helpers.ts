import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { homeOf } from '@agentenv/test-support/server';
import { s3RepositoryToml, type S3Server } from '@agentenv/test-support/snapshot';

/** Drops a test node's sandbox records, captures and runtime cache (not its cached templates). */
export function resetNode(instance: number): void {
  for (const d of ['state', 'captures', 'snapshot-cache', 'snapshot-store', 'secrets/p2p-key'])
    rmSync(path.join(homeOf(instance), d), { recursive: true, force: true });
}

/** Gives a node its p2p secret key before it starts, so peers can be configured with its id. */
export function writeP2pKey(home: string, secretKey: Buffer): void {
  const dir = path.join(home, 'secrets');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(path.join(dir, 'p2p-key'), secretKey.toString('hex') + '\n', { mode: 0o600 });
}

export interface P2pSettings {
  readonly bindAddrs?: readonly string[];
  readonly peers?: readonly string[];
  readonly requestTimeoutMs?: number;
}

/** A node config file: the S3 repository, and `[p2p]` on when `p2p` is given. */
export function nodeConfig(
  dir: string,
  name: string,
  s3: S3Server,
  prefix: string,
  p2p?: P2pSettings,
): string {
  const file = path.join(dir, name);
  const list = (xs: readonly string[]) => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
  writeFileSync(
    file,
    [
      ...s3RepositoryToml({ endpoint: s3.endpoint, bucket: s3.bucket, prefix }),
      ...(p2p
        ? [
            '[p2p]',
            'enabled = true',
            `bind_addrs = ${list(p2p.bindAddrs ?? ['127.0.0.1:0', '[::1]:0'])}`,
            `peers = ${list(p2p.peers ?? [])}`,
            ...(p2p.requestTimeoutMs ? [`request_timeout_ms = ${p2p.requestTimeoutMs}`] : []),
          ]
        : []),
      '',
    ].join('\n'),
  );
  return file;
}

/** Sum of a Prometheus counter's samples whose labels include `labels`. */
export async function metric(
  url: string,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z0-9_:]+)(?:\{([^}]*)\})? ([0-9.eE+-]+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

/** Inodes of the UDP sockets (v4 and v6) that process `pid` holds open. */
export function udpSocketsOf(pid: number): string[] {
  const held = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    const link = (() => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        return '';
      }
    })();
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) held.add(m[1]!);
  }
  const udp: string[] = [];
  for (const table of ['udp', 'udp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const inode = line.trim().split(/\s+/)[9];
      if (inode && held.has(inode)) udp.push(inode);
    }
  }
  return udp;
}

/** The corrupting peer (evil-peer.ts) in its own process, its id `IrohEndpoint.idOf(secretKey)`. */
export async function startEvilPeer(args: {
  repository: unknown;
  snapshotId: string;
  apiKey: string;
  bindAddr: string;
  secretKey: Buffer;
}): Promise<{ peer: string; stop(): Promise<void> }> {
  const script = fileURLToPath(new URL('./evil-peer.ts', import.meta.url));
  // Workspace packages from their sources (their `source` export condition), as in the test.
  const json = JSON.stringify({ ...args, secretKey: args.secretKey.toString('hex') });
  const argv = ['--conditions=source', '--import', 'tsx', script, json];
  const child: ChildProcess = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  const peer = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^READY (\S+) (\S+)$/m.exec(out);
      if (m) resolve(`${m[1]}@${m[2]}`);
    });
    child.once('exit', (code) => reject(new Error(`evil peer exited with ${code}: ${out}`)));
  });
  return {
    peer,
    async stop() {
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * Test fixtures for the real network tests (root only). A fake "internet": a namespace behind a
 * veth with TEST-NET-3 addresses, serving HTTP on 203.0.113.1, on 169.254.169.254 and on addresses
 * of special-purpose ranges (IETF protocol assignments, benchmarking). A policy-
 * routing rule sends everything the test slots forward to that namespace or to "unreachable", so
 * no test packet can leave this machine even if a rule under test were wrong.
 */

const exec = promisify(execFile);

export const INTERNET_NS = 'aenvnettest-inet';
const INTERNET_VETH = 'aenvnett0';
export const INTERNET_ADDRESS = '203.0.113.1';
/** The root namespace's address on the fake-internet link: a host address a sandbox must not reach. */
export const INTERNET_ROOT_SIDE = '203.0.113.254';
export const METADATA_ADDRESS = '169.254.169.254';
/** Addresses of special-purpose ranges (192.0.0.0/24, 198.18.0.0/15) the fake internet serves too. */
export const SPECIAL_PURPOSE_ADDRESSES: readonly string[] = ['192.0.0.8', '198.18.0.1'];
/** Served like the metadata address: on the fake internet's loopback, routed to it. */
const SERVED_ELSEWHERE = [METADATA_ADDRESS, ...SPECIAL_PURPOSE_ADDRESSES];
/** Every test manager takes its host range from here. */
export const TEST_SUPERNET = '10.237.0.0/16';
const TEST_TABLE = '237';
const RULE_PRIORITY = '237';

export async function sh(cmd: string, args: string[], input?: string): Promise<string> {
  if (input === undefined) return (await exec(cmd, args, { maxBuffer: 64 << 20 })).stdout;
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 64 << 20 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
    child.stdin?.end(input);
  });
}

async function quiet(cmd: string, args: string[]): Promise<void> {
  await exec(cmd, args).catch(() => undefined);
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Starts `node -e script` (optionally inside a namespace) and waits for it to print "ready". */
export async function startServer(script: string, netns?: string): Promise<ChildProcess> {
  const args = netns ? ['netns', 'exec', netns, process.execPath, '-e', script] : ['-e', script];
  const child = spawn(netns ? 'ip' : process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 10_000);
    child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}: ${err}`));
    });
  });
  return child;
}

/** An HTTP server answering `${body}` on every request. */
export function httpServerScript(body: string, port: number, host = '0.0.0.0'): string {
  return `require('http').createServer((q, r) => r.end(${JSON.stringify(body)}))
    .listen(${port}, ${JSON.stringify(host)}, () => console.log('ready'));`;
}

export function stopServer(child: ChildProcess | undefined): void {
  if (child?.pid && child.exitCode === null) child.kill('SIGKILL');
}

export interface FetchResult {
  readonly ok: boolean;
  readonly body: string;
}

/** curl from inside a namespace, as the sandbox would. */
export async function fetchFrom(netns: string, url: string, timeoutSeconds = 2): Promise<FetchResult> {
  try {
    const { stdout } = await exec('ip', [
      'netns',
      'exec',
      netns,
      'curl',
      '-sS',
      '--noproxy',
      '*',
      // 2 s by default, past the 1 s ARP and SYN retry: a fresh slot's first packet is now and then
      // lost on its way out and back (the router's counters show it leave), and a retry gets through.
      '--connect-timeout',
      String(timeoutSeconds),
      '--max-time',
      String(timeoutSeconds),
      url,
    ]);
    return { ok: true, body: stdout };
  } catch (error) {
    return { ok: false, body: String((error as { stderr?: string }).stderr ?? error) };
  }
}

/** Plain fetch from the root namespace, as the node would. */
export async function fetchFromHost(url: string, timeoutMs = 3000): Promise<FetchResult> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return { ok: response.ok, body: await response.text() };
  } catch (error) {
    return { ok: false, body: String(error) };
  }
}

export interface TestInternet {
  close(): Promise<void>;
}

export async function removeTestInternet(): Promise<void> {
  await quiet('ip', ['rule', 'del', 'priority', RULE_PRIORITY]);
  await quiet('ip', ['route', 'flush', 'table', TEST_TABLE]);
  await quiet('ip', ['link', 'del', INTERNET_VETH]);
  await quiet('ip', ['netns', 'del', INTERNET_NS]);
}

export async function createTestInternet(): Promise<TestInternet> {
  await removeTestInternet();
  await sh('ip', ['netns', 'add', INTERNET_NS]);
  await sh('ip', [
    'link',
    'add',
    INTERNET_VETH,
    'type',
    'veth',
    'peer',
    'name',
    'eth0',
    'netns',
    INTERNET_NS,
  ]);
  await sh(
    'ip',
    ['-batch', '-'],
    `addr add ${INTERNET_ROOT_SIDE}/24 dev ${INTERNET_VETH}\nlink set ${INTERNET_VETH} up\n`,
  );
  await sh(
    'ip',
    ['-n', INTERNET_NS, '-batch', '-'],
    [
      `addr add ${INTERNET_ADDRESS}/24 dev eth0`,
      ...SERVED_ELSEWHERE.map((a) => `addr add ${a}/32 dev lo`),
      'link set lo up',
      'link set eth0 up',
      `route add default via ${INTERNET_ROOT_SIDE}`,
      '',
    ].join('\n'),
  );
  await sh(
    'ip',
    ['-batch', '-'],
    [
      `route add throw ${TEST_SUPERNET} table ${TEST_TABLE}`,
      `route add 203.0.113.0/24 dev ${INTERNET_VETH} table ${TEST_TABLE}`,
      ...SERVED_ELSEWHERE.map(
        (a) => `route add ${a}/32 via ${INTERNET_ADDRESS} dev ${INTERNET_VETH} table ${TEST_TABLE}`,
      ),
      `route add unreachable default table ${TEST_TABLE}`,
      `rule add priority ${RULE_PRIORITY} from ${TEST_SUPERNET} lookup ${TEST_TABLE}`,
      '',
    ].join('\n'),
  );
  const server = await startServer(
    `require('http').createServer((q, r) => r.end('internet:' + q.socket.localAddress))
      .listen(80, '0.0.0.0', () => console.log('ready'));`,
    INTERNET_NS,
  );
  return {
    async close() {
      stopServer(server);
      await removeTestInternet();
    },
  };
}

/** Everything in the root namespace that carries a node tag. */
export async function leftovers(
  tag: string,
): Promise<{ namespaces: string[]; links: string[]; rules: string[] }> {
  const namespaces = (await sh('ip', ['netns', 'list']))
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name.startsWith(`aenv-${tag}-`));
  const links = (await sh('ip', ['-o', 'link', 'show']))
    .split('\n')
    .filter((line) => line.includes(` ae-${tag}-`));
  const rules = (await sh('iptables-save', [])).split('\n').filter((line) => line.includes(`AENV-${tag}-`));
  return { namespaces, links, rules };
}

export const silentLogger = { info: () => undefined, warn: () => undefined };

/**
 * Where a benchmark's own aenv-server lives: a port, home, runtime dir, network tag and address
 * range that no test node and no other benchmark uses, with the warm pool off so every create
 * measures the path under test.
 */
export interface BenchNode {
  readonly url: string;
  readonly home: string;
  readonly runtime: string;
  readonly tag: string;
  /** Environment for startServer (packages/node/test/e2e/server-fixture.ts). */
  readonly env: Record<string, string>;
}

export function benchNode(o: { port: number; name: string; tag: string; hostRange: string }): BenchNode {
  const home = `/var/lib/aenv-bench-${o.name}`;
  const runtime = `/run/aenv-bench-${o.name}`;
  return {
    url: `http://127.0.0.1:${o.port}`,
    home,
    runtime,
    tag: o.tag,
    env: {
      API_ADDR: `127.0.0.1:${o.port}`,
      AENV_HOME_PATH: home,
      AENV_RUNTIME_PATH: runtime,
      AENV_NETWORK_NODE_TAG: o.tag,
      AENV_NETWORK_HOST_RANGE: o.hostRange,
      AENV_POOL_SIZE: '0',
    },
  };
}

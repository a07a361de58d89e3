import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import {
  api,
  NODE_TAG as TAG,
  removeState,
  spawnServer,
  startServer,
  useSdkEnv,
} from '@agentenv/test-support/server';

/** `iptables-save` without comments and packet counters, split into the test node's lines and the rest. */
function firewall(): { own: string[]; rest: string[] } {
  const lines = execFileSync('iptables-save', { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => line.replace(/\[\d+:\d+\]/, ''));
  // Ours: the `AENV-e2e-*` chains, their rules and the FORWARD/INPUT/POSTROUTING jumps to them.
  const own = (line: string) => line.includes(`AENV-${TAG}-`) || line.includes(`ae-${TAG}-`);
  // Other nodes on this machine (other tags) may come and go meanwhile.
  const otherNode = (line: string) => /AENV-|ae-[a-z0-9]+-\+/.test(line);
  return { own: lines.filter(own), rest: lines.filter((line) => !otherNode(line)) };
}

function ownNamespaces(): string[] {
  return execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.startsWith(`aenv-${TAG}-`));
}

async function waitForExit(child: ReturnType<typeof spawnServer>['child']): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const [code] = (await once(child, 'exit')) as [number | null];
  return code;
}

describe.skipIf(process.getuid?.() !== 0)('a node stopped with SIGTERM', () => {
  it('removes its iptables chains, jump rules and namespaces, with a sandbox running', async () => {
    removeState();
    const before = firewall();
    const server = await startServer({ AENV_POOL_SIZE: '1' });
    try {
      useSdkEnv();
      const created = await api('POST', '/sandboxes', { templateID: 'base' });
      expect(created.status).toBe(201);
      const running = firewall().own;
      expect(running.some((l) => l.startsWith(`-A FORWARD -j AENV-${TAG}-FWD`))).toBe(true);
      expect(running.some((l) => l.startsWith(`-A POSTROUTING -j AENV-${TAG}-NAT`))).toBe(true);
      expect(ownNamespaces().length).toBeGreaterThan(0);
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await waitForExit(server.child)).toBe(0);
    expect(firewall()).toEqual({ own: [], rest: before.rest });
    expect(ownNamespaces()).toEqual([]);
    removeState();
  });

  it('cleans up too when the signal arrives while it is still starting', async () => {
    removeState();
    const before = firewall();
    const server = spawnServer({ AENV_POOL_SIZE: '1', AENV_LOG_LEVEL: 'info' });
    // The moment its chains exist but it does not listen yet.
    const deadline = Date.now() + 60_000;
    while (!server.output().includes('sandbox networking ready')) {
      if (server.child.exitCode !== null) throw new Error(`node exited early:\n${server.output()}`);
      if (Date.now() > deadline) throw new Error(`node never set up networking:\n${server.output()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    server.child.kill('SIGTERM');
    expect(await waitForExit(server.child)).toBe(0);
    expect(firewall()).toEqual({ own: [], rest: before.rest });
    expect(ownNamespaces()).toEqual([]);
    removeState();
  });
});

import { execFileSync } from 'node:child_process';
import type { SandboxNet } from '@agentenv/node';
import { pidAlive } from '../processes.js';

/**
 * Ad-hoc network namespaces for the runtime tests, standing in for the node's NetworkManager:
 * one namespace per sandbox with a veth pair, host side 10.251.B.(4k+1)/30, sandbox side .(4k+2).
 * runsc moves the sandbox-side address into the sandbox, so a namespace serves one sandbox only.
 */
export interface TestNet extends SandboxNet {
  readonly name: string;
  destroy(): void;
}

const NS_PREFIX = 'aenvtest-';
const ifTag = (pid: number) => `e${pid.toString(36)}`;
let next = 0;
const live = new Set<TestNet>();

/** Removes namespaces (and their host-side links) left by test processes that died. */
export function sweepStaleTestNets(): void {
  const names = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  for (const m of names.matchAll(new RegExp(`^${NS_PREFIX}(\\d+)-(\\d+)`, 'gm'))) {
    const pid = Number(m[1]);
    if (pidAlive(pid)) continue;
    ipQuiet('link', 'del', `${ifTag(pid)}h${m[2]}`);
    ipQuiet('netns', 'del', m[0]);
  }
}

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function ipQuiet(...args: string[]): void {
  try {
    execFileSync('ip', args, { stdio: 'ignore' });
  } catch {
    // already gone (deleting the namespace removes the pair)
  }
}

/**
 * `within`: addresses from `<prefix>.<firstThird + n/64>.x` instead of the tests' 10.251/16 (a
 * benchmark that runs alone, in its own range).
 */
export function createTestNet(within?: { prefix: string; firstThird: number }): TestNet {
  if (next === 0) sweepStaleTestNets();
  const n = next++ % 256;
  // Spread concurrent test processes over different /24s.
  const third = (within?.firstThird ?? (process.pid % 64) * 4) + Math.floor(n / 64);
  const prefix = within?.prefix ?? '10.251';
  const base = (n % 64) * 4;
  const name = `${NS_PREFIX}${process.pid}-${n}`;
  const hostIf = `${ifTag(process.pid)}h${n}`;
  const nsIf = `${ifTag(process.pid)}s${n}`;
  const host = `${prefix}.${third}.${base + 1}`;
  const sandbox = `${prefix}.${third}.${base + 2}`;
  ipQuiet('netns', 'del', name);
  ipQuiet('link', 'del', hostIf);
  ip('netns', 'add', name);
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
  ip('link', 'set', nsIf, 'netns', name);
  ip('addr', 'add', `${host}/30`, 'dev', hostIf);
  ip('link', 'set', hostIf, 'up');
  ip('-n', name, 'addr', 'add', `${sandbox}/30`, 'dev', nsIf);
  ip('-n', name, 'link', 'set', nsIf, 'up');
  ip('-n', name, 'link', 'set', 'lo', 'up');
  ip('-n', name, 'route', 'add', 'default', 'via', host);
  const net: TestNet = {
    name,
    netnsPath: `/run/netns/${name}`,
    hostAddress: sandbox,
    destroy() {
      live.delete(net);
      ipQuiet('link', 'del', hostIf);
      ipQuiet('netns', 'del', name);
    },
  };
  live.add(net);
  return net;
}

export function destroyAllTestNets(): void {
  for (const n of [...live]) n.destroy();
}

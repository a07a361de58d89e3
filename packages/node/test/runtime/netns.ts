import { execFileSync } from 'node:child_process';
import type { SandboxNet } from '../../src/runtime/driver.js';

/**
 * Ad-hoc network namespaces for the runtime tests, standing in for the node's NetworkManager:
 * one namespace per sandbox with a veth pair, host side 10.251.B.(4k+1)/30, sandbox side .(4k+2).
 * runsc moves the sandbox-side address into the sandbox, so a namespace serves one sandbox only.
 */
export interface TestNet extends SandboxNet {
  readonly name: string;
  destroy(): void;
}

const TAG = `at${(process.pid % 1000).toString(36)}`;
let next = 0;
const live = new Set<TestNet>();

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export function createTestNet(): TestNet {
  const n = next++ % 4096;
  const third = Math.floor(n / 64);
  const base = (n % 64) * 4;
  const name = `${TAG}-${n}`;
  const hostIf = `${TAG}h${n}`;
  const nsIf = `${TAG}s${n}`;
  const host = `10.251.${third}.${base + 1}`;
  const sandbox = `10.251.${third}.${base + 2}`;
  try {
    ip('netns', 'del', name);
  } catch {
    // not there: the usual case
  }
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
      for (const args of [['link', 'del', hostIf], ['netns', 'del', name]]) {
        try {
          ip(...args);
        } catch {
          // already gone (deleting the namespace removes the pair)
        }
      }
    },
  };
  live.add(net);
  return net;
}

export function destroyAllTestNets(): void {
  for (const n of [...live]) n.destroy();
}

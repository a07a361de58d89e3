import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NODE_TAG as TAG } from '@agentenv/test-support/server';

const V2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
/** Where the node's driver puts one cgroup per runtime sandbox (the freezer's, on cgroup v1). */
export const CGROUPS = V2 ? `/sys/fs/cgroup/aenv-${TAG}` : `/sys/fs/cgroup/freezer/aenv-${TAG}`;

/** The runtime sandboxes' cgroups now (pooled ones included), by directory name. */
export function cgroups(): Set<string> {
  if (!existsSync(CGROUPS)) return new Set();
  return new Set(
    readdirSync(CGROUPS, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name),
  );
}

/** Whether the cgroup freezer holds the sandbox's processes stopped. */
export function frozen(cgroup: string): boolean {
  const dir = join(CGROUPS, cgroup);
  if (V2) return /^frozen 1$/m.test(readFileSync(join(dir, 'cgroup.events'), 'utf8'));
  return readFileSync(join(dir, 'freezer.state'), 'utf8').trim() === 'FROZEN';
}

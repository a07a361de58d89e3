import { readdirSync, rmdirSync, type Dirent } from 'node:fs';

/**
 * Removes the (empty, once its nodes stopped) cgroups whose names start with `prefix` under
 * every controller: nodes create `aenv-<tag>` parents and keep them.
 */
export function removeCgroups(prefix: string): void {
  const roots = ['/sys/fs/cgroup', ...readdirSync('/sys/fs/cgroup').map((c) => `/sys/fs/cgroup/${c}`)];
  const remove = (dir: string) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) remove(`${dir}/${e.name}`);
    try {
      rmdirSync(dir);
    } catch {
      // still in use, or not a cgroup
    }
  };
  for (const root of roots) {
    let entries: string[];
    try {
      entries = readdirSync(root);
    } catch {
      continue;
    }
    for (const name of entries) if (name.startsWith(prefix)) remove(`${root}/${name}`);
  }
}

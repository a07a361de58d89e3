import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { invalid } from '@agentenv/common';

interface PasswdEntry {
  name: string;
  uid: number;
}

function parsePasswd(text: string): PasswdEntry[] {
  const out: PasswdEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(':');
    const uid = Number(f[2]);
    if (f.length >= 7 && f[0] && Number.isInteger(uid)) out.push({ name: f[0], uid });
  }
  return out;
}

/**
 * The account name an image or build `USER` names (`name`, `uid`, `name:group`, `uid:gid`; empty
 * is root), looked up in the given /etc/passwd text: envd runs processes as named users only.
 */
export function userName(spec: string, passwd: string | undefined): string {
  const user = spec.split(':')[0]!.trim();
  if (!user || user === 'root' || user === '0') return 'root';
  const entries = parsePasswd(passwd ?? '');
  const found = /^\d+$/.test(user)
    ? entries.find((e) => e.uid === Number(user))
    : entries.find((e) => e.name === user);
  if (!found) throw invalid(`user '${user}' has no entry in the image's /etc/passwd`);
  return found.name;
}

const kind = (p: string) =>
  lstat(p).then(
    (s) => (s.isFile() ? 'file' : s.isDirectory() ? 'dir' : s.isCharacterDevice() ? 'whiteout' : 'other'),
    () => 'absent' as const,
  );

/**
 * /etc/passwd of an image given as overlayfs-form layers (lowest first), read on the host without
 * following any symlink: the topmost layer that has `etc/passwd` (or hides it with a whiteout)
 * decides. A symlinked /etc or passwd counts as absent, so nothing outside the layers is read.
 */
export async function imagePasswd(layers: readonly string[]): Promise<string | undefined> {
  for (const layer of [...layers].reverse()) {
    const etc = await kind(join(layer, 'etc'));
    if (etc === 'absent') continue;
    if (etc !== 'dir') return undefined;
    const passwd = await kind(join(layer, 'etc', 'passwd'));
    if (passwd === 'absent') continue;
    return passwd === 'file' ? readFile(join(layer, 'etc', 'passwd'), 'utf8') : undefined;
  }
  return undefined;
}

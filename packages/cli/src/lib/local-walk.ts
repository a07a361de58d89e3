import { lstat, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { CliError } from '../errors.js';
import type { LocalEntry } from './transfer-plan.js';

export interface LocalTree {
  kind: 'file' | 'dir';
  entries: LocalEntry[];
  skipped: string[];
}

/**
 * Walks a local file or directory. Symlinks to files are followed (their content is copied);
 * symlinks to directories and special files are skipped, so a link cycle cannot recurse.
 */
export async function walkLocal(root: string): Promise<LocalTree> {
  let st;
  try {
    st = await stat(root);
  } catch (err) {
    throw new CliError(
      `cannot read ${root}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  if (st.isFile())
    return {
      kind: 'file',
      entries: [{ rel: '', kind: 'file', size: st.size, mode: st.mode & 0o777 }],
      skipped: [],
    };
  if (!st.isDirectory()) throw new CliError(`${root} is neither a file nor a directory`);

  const entries: LocalEntry[] = [{ rel: '', kind: 'dir', size: 0 }];
  const skipped: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    const dir = path.join(root, ...rel.split('/').filter(Boolean));
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const childRel = rel ? `${rel}/${name}` : name;
      const full = path.join(dir, name);
      const l = await lstat(full);
      if (l.isDirectory()) {
        entries.push({ rel: childRel, kind: 'dir', size: 0 });
        await walk(childRel);
      } else if (l.isFile())
        entries.push({ rel: childRel, kind: 'file', size: l.size, mode: l.mode & 0o777 });
      else if (l.isSymbolicLink()) {
        const t = await stat(full).catch(() => undefined);
        if (t?.isFile()) entries.push({ rel: childRel, kind: 'file', size: t.size, mode: t.mode & 0o777 });
        else skipped.push(`${full} (${t ? 'symlink to a directory' : 'dangling symlink'})`);
      } else skipped.push(`${full} (not a regular file)`);
    }
  };
  await walk('');
  return { kind: 'dir', entries, skipped };
}

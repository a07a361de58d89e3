import type { BigIntStats } from 'node:fs';
import { lstat, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { TimestampSchema, type Timestamp } from '@bufbuild/protobuf/wkt';
import { type EntryInfo, EntryInfoSchema, FileType } from '@agentenv/protocol';
import { metadataStore, type MetadataStore } from './metadata.js';
import { goFileMode, goModeString } from './mode.js';

/** Owner and group names for ids (UserDatabase.namer()). */
export interface Namer {
  user(uid: number): string;
  group(gid: number): string;
}

function fileTypeOf(st: BigIntStats): FileType {
  if (st.isFile()) return FileType.FILE;
  if (st.isDirectory()) return FileType.DIRECTORY;
  if (st.isSymbolicLink()) return FileType.SYMLINK;
  return FileType.UNSPECIFIED;
}

export function timestampFromNs(ns: bigint): Timestamp {
  const billion = 1_000_000_000n;
  let seconds = ns / billion;
  let nanos = ns % billion;
  if (nanos < 0n) {
    seconds -= 1n;
    nanos += billion;
  }
  return create(TimestampSchema, { seconds, nanos: Number(nanos) });
}

/**
 * EntryInfo of `p` as E2B's envd builds it: from lstat, except that a symlink reports its
 * target's type and permission bits (UNSPECIFIED and 0 when dangling) and `symlinkTarget` is the
 * fully resolved target path (the link's own path when it cannot be resolved). `permissions` is
 * the link's own Go mode string ("Lrwxrwxrwx"). Metadata is read through symlinks.
 * Throws the fs error (ENOENT, ...) when `p` cannot be lstat'ed.
 */
export async function entryInfo(
  p: string,
  namer: Namer,
  metadata: MetadataStore = metadataStore,
): Promise<EntryInfo> {
  const st = await lstat(p, { bigint: true });
  let type = fileTypeOf(st);
  let mode = Number(st.mode) & 0o777;
  let symlinkTarget: string | undefined;
  if (st.isSymbolicLink()) {
    symlinkTarget = await realpath(p).catch(() => p);
    try {
      const target = await stat(symlinkTarget, { bigint: true });
      type = fileTypeOf(target);
      mode = Number(target.mode) & 0o777;
    } catch {
      type = FileType.UNSPECIFIED;
      mode = 0;
    }
  }
  return create(EntryInfoSchema, {
    name: path.basename(p) || p,
    type,
    path: p,
    size: st.size,
    mode,
    permissions: goModeString(goFileMode(Number(st.mode))),
    owner: namer.user(Number(st.uid)),
    group: namer.group(Number(st.gid)),
    modifiedTime: timestampFromNs(st.mtimeNs),
    symlinkTarget,
    metadata: await metadata.read(p),
  });
}

/** Like entryInfo, but undefined when the entry is gone (a benign race for events and listings). */
export async function entryInfoIfExists(p: string, namer: Namer): Promise<EntryInfo | undefined> {
  try {
    return await entryInfo(p, namer);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

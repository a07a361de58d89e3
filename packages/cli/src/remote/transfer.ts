import { randomBytes } from 'node:crypto';
import { chmod, mkdir, rename, rm, stat } from 'node:fs/promises';
import { Code, ConnectError } from '@connectrpc/connect';
import { FileType, type EntryInfo } from '@agentenv/protocol';
import {
  downloadFile,
  explainEnvdError,
  filesystemClient,
  runProgram,
  runningSandbox,
  uploadFile,
  type FilesystemClient,
  type SandboxTarget,
} from '../client/envd.js';
import type { Context } from '../context.js';
import { CliError } from '../errors.js';
import { walkLocal } from '../lib/local-walk.js';
import {
  downloadDestination,
  modeGroups,
  planDownload,
  planUpload,
  tempSibling,
  uploadDestination,
  type FileCopy,
  type RemoteEntry,
} from '../lib/transfer-plan.js';
import { formatBytes } from '../output/format.js';
import { Progress } from '../output/progress.js';

/** Files moved at once. */
const CONCURRENCY = 4;
/** ListDir depth for a recursive download (envd walks this many levels). */
const MAX_DEPTH = 1024;

async function remoteStat(
  fs: FilesystemClient,
  target: SandboxTarget,
  p: string,
): Promise<EntryInfo | undefined> {
  try {
    return (await fs.stat({ path: p })).entry;
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
    throw await explainEnvdError(err, target, `stat ${p}`);
  }
}

async function localStat(p: string) {
  return stat(p).catch(() => undefined);
}

async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function kindOf(e: EntryInfo): RemoteEntry['kind'] {
  return e.type === FileType.FILE ? 'file' : e.type === FileType.DIRECTORY ? 'dir' : 'other';
}

/** Downloads one file next to its target and renames it into place, so readers never see half a file. */
async function downloadAtomically(
  target: SandboxTarget,
  f: FileCopy,
  user: string | undefined,
  progress: Progress,
): Promise<void> {
  const tmp = tempSibling(f.to, randomBytes(4).toString('hex'));
  try {
    await downloadFile(target, f.from, tmp, { ...(user ? { user } : {}), onBytes: (n) => progress.add(n) });
    if (f.mode) await chmod(tmp, f.mode & 0o777);
    await rename(tmp, f.to);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  progress.fileDone();
}

/** `aenv upload`: a local file or tree into the sandbox, as cp -r would. */
export async function upload(
  ctx: Context,
  id: string,
  local: string,
  remote: string,
  opts: { user?: string },
): Promise<void> {
  const tree = await walkLocal(local);
  const target = await runningSandbox(await ctx.api(), id);
  const fs = filesystemClient(target, opts.user);
  const existing = await remoteStat(fs, target, remote);
  const remoteIsDir = existing?.type === FileType.DIRECTORY;
  if (tree.kind === 'dir' && existing && !remoteIsDir)
    throw new CliError(`cannot copy directory ${local} onto file ${remote} in the sandbox`);
  const dest = uploadDestination(local, remote, remoteIsDir);
  const plan = planUpload(local, tree.entries, dest);
  for (const s of tree.skipped) ctx.out.note(`skipped ${s}`);

  for (const d of plan.dirs) {
    try {
      await fs.makeDir({ path: d });
    } catch (err) {
      if (!(err instanceof ConnectError && err.code === Code.AlreadyExists))
        throw await explainEnvdError(err, target, `mkdir ${d}`);
    }
  }
  const progress = new Progress('upload', plan.totalBytes, plan.files.length);
  await eachLimited(plan.files, CONCURRENCY, async (f) => {
    await uploadFile(target, f.from, f.size, f.to, {
      ...(opts.user ? { user: opts.user } : {}),
      onBytes: (n) => progress.add(n),
    });
    progress.fileDone();
  });
  progress.finish();
  for (const [mode, paths] of modeGroups(plan.files)) {
    for (let i = 0; i < paths.length; i += 200) {
      const r = await runProgram(
        target,
        'chmod',
        [mode.toString(8), '--', ...paths.slice(i, i + 200)],
        opts.user,
      );
      if (r.exitCode !== 0)
        ctx.out.note(`warning: could not set mode ${mode.toString(8)}: ${r.stderr.trim()}`);
    }
  }
  ctx.out.result(
    { sandboxID: id, source: local, destination: dest, files: plan.files.length, bytes: plan.totalBytes },
    `Uploaded ${plan.files.length} file(s), ${formatBytes(plan.totalBytes)}, to ${dest}`,
  );
}

/** `aenv download`: a file or tree out of the sandbox, each file renamed into place once whole. */
export async function download(
  ctx: Context,
  id: string,
  remote: string,
  local: string | undefined,
  opts: { user?: string },
): Promise<void> {
  const target = await runningSandbox(await ctx.api(), id);
  const fs = filesystemClient(target, opts.user);
  const root = await remoteStat(fs, target, remote);
  if (!root) throw new CliError(`${remote}: no such file or directory in sandbox ${id}`);
  const localSt = local === undefined ? undefined : await localStat(local);
  const dest = downloadDestination(root.name, local, Boolean(localSt?.isDirectory()));
  const user = opts.user;

  let files: FileCopy[];
  let dirs: string[] = [];
  let total: number;
  if (root.type === FileType.DIRECTORY) {
    const destSt = await localStat(dest);
    if (destSt && !destSt.isDirectory())
      throw new CliError(`cannot copy directory ${remote} onto file ${dest}`);
    let entries: EntryInfo[];
    try {
      entries = (await fs.listDir({ path: root.path, depth: MAX_DEPTH })).entries;
    } catch (err) {
      throw await explainEnvdError(err, target, `list ${remote}`);
    }
    const plan = planDownload(
      root.path,
      entries.map((e) => ({
        path: e.path,
        kind: kindOf(e),
        size: Number(e.size),
        mode: e.mode,
        ...(e.symlinkTarget !== undefined ? { symlinkTarget: e.symlinkTarget } : {}),
      })),
      dest,
    );
    for (const s of plan.skipped) ctx.out.note(`skipped ${s}`);
    ({ files, dirs, totalBytes: total } = plan);
  } else if (root.type === FileType.FILE) {
    files = [{ from: root.path, to: dest, size: Number(root.size), mode: root.mode }];
    total = Number(root.size);
  } else throw new CliError(`${remote} is neither a file nor a directory`);

  for (const d of dirs) await mkdir(d, { recursive: true });
  const progress = new Progress('download', total, files.length);
  await eachLimited(files, CONCURRENCY, (f) => downloadAtomically(target, f, user, progress));
  progress.finish();
  ctx.out.result(
    { sandboxID: id, source: root.path, destination: dest, files: files.length, bytes: total },
    `Downloaded ${files.length} file(s), ${formatBytes(total)}, to ${dest}`,
  );
}

import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DomainError } from '@agentenv/common';
import { VOLUMES_SANDBOX_PATH } from '@agentenv/protocol';
import { CAPTURE_FORMAT, listCaptureFiles, writeCaptureMeta } from '@agentenv/snapshot';
import type { EnvdApi } from '../envd/index.js';
import { TOOLS_SANDBOX_PATH } from '../envd/tools.js';
import type { Capture, Resources } from '../runtime/index.js';
import { isoTime } from '../util/index.js';
import type { Live, SandboxCore } from './core.js';
import { initFor, sandboxVolumes } from './create.js';
import { filesSince, type SandboxRecord } from './record.js';

/**
 * Filesystem-only pauses. The writable layer of a gVisor sandbox lives inside the runtime (in the
 * sentry's memory or its own file format), so it is read from inside through envd: every path
 * whose inode changed (ctime) since the sandbox's files began to differ from its template's ready
 * state (filesSince: its start, or that of the sandbox a snapshot or fork of it came from) goes
 * into a tar, and every changed directory's entries are listed, which is what tells deletions
 * apart. ctime cannot be set by the sandbox's processes, so nothing changed is missed; what the
 * template's ready state has (its image, a build's steps) is not stored. A resume starts the
 * template as a create does (its ready state, with no process of the sandbox's), applies the
 * tar, removes what was deleted, then /init as at create.
 */

/** Files of a filesystem-only capture, beside capture.json. */
export const FS_FILES = { layer: 'layer.tar', dirs: 'dirs', entries: 'entries' } as const;
/** Marks a capture as filesystem-only in capture.json's settings. */
export const FS_CAPTURE_SETTING = 'filesystem';

/** Scratch space inside the sandbox; on a tmpfs that is itself never captured. */
const SCRATCH = '/dev/shm/.aenv-fs';
/** Never captured: kernel and runtime file systems, the read-only tools mount, the volumes' mount point. */
const PRUNED = ['/proc', '/sys', '/dev', '/run', TOOLS_SANDBOX_PATH, VOLUMES_SANDBOX_PATH];

const prune = PRUNED.map((p) => `-path ${p}`).join(' -o ');

/** A path as a find(1) pattern that matches only itself. */
const literalPattern = (p: string) => p.replace(/[\\*?[\]]/g, '\\$&');

/**
 * Lists what changed since $SINCE (epoch seconds) and archives it into $SCRATCH; the paths in
 * $KEEP_OUT (find patterns, one per line: the sandbox's volumes, which are not its files) are
 * left out like the system's. One walk of the tree writes both lists: walking it takes seconds
 * in a sandbox, most of a capture's time.
 */
export const CAPTURE_SCRIPT = `set -e
rm -rf ${SCRATCH}; mkdir -p ${SCRATCH}; cd ${SCRATCH}
set --
while IFS= read -r p; do
  if [ -n "$p" ]; then set -- "$@" -o -path "$p"; fi
done <<EOF
$KEEP_OUT
EOF
find / \\( ${prune} "$@" \\) -prune -o -newerct "@$SINCE" -fprint0 changed -type d -fprint0 ${FS_FILES.dirs}
xargs -0 -r -I{} find {} -mindepth 1 -maxdepth 1 -print0 < ${FS_FILES.dirs} > ${FS_FILES.entries}
# 1: a file changed while it was read; its newest content is what the sandbox had last.
tar --null --no-recursion -T changed --numeric-owner --xattrs -cpf ${FS_FILES.layer} || [ $? -eq 1 ]`;

/** Applies a captured layer from $SCRATCH to a freshly booted root, deletions included. */
export const RESTORE_SCRIPT = `set -e
cd ${SCRATCH}
tar --numeric-owner --xattrs --overwrite -xpf ${FS_FILES.layer} -C / 2> tar-errors || cat tar-errors >&2
xargs -0 -r -I{} find {} -mindepth 1 -maxdepth 1 -print0 < ${FS_FILES.dirs} | sort -z > now
sort -z ${FS_FILES.entries} > keep
comm -z -23 now keep | xargs -0 -r rm -rf --
cd /; rm -rf ${SCRATCH}`;

async function run(envd: EnvdApi, cmd: string, envs: Record<string, string>, token?: string) {
  const err: string[] = [];
  const code = await envd.exec({
    cmd,
    user: 'root',
    envs,
    timeoutMs: 300_000,
    onOutput: (t, s) => s === 'stderr' && err.push(t),
    ...(token ? { token } : {}),
  });
  return { code, stderr: err.join('').slice(-2000) };
}

/**
 * Captures a running sandbox's writable layer into `dir` (a capture directory: capture.json
 * last). The sandbox keeps running; the caller stops it.
 */
export async function captureFilesystem(core: SandboxCore, rec: SandboxRecord, live: Live, dir: string) {
  const envd = core.d.envd(live.slot.hostAddress, live.handle.envdPort);
  const token = rec.envdAccessToken;
  // One second early: ctime has a coarser clock than the start time on some file systems.
  const since = Math.floor(Date.parse(filesSince(rec)) / 1000) - 1;
  // Mount paths hold no line breaks (checkMountPath), so one per line is unambiguous.
  const keepOut = (rec.volumeMounts ?? []).map((m) => literalPattern(m.path)).join('\n');
  const r = await run(envd, CAPTURE_SCRIPT, { SINCE: String(since), KEEP_OUT: keepOut }, token);
  if (r.code !== 0)
    throw new DomainError('internal', `filesystem capture failed (exit ${r.code}): ${r.stderr}`);
  const tmp = `${dir}.part`;
  await mkdir(tmp, { recursive: true });
  for (const f of Object.values(FS_FILES)) {
    const data = await envd.readFile(`${SCRATCH}/${f}`, 'root', token);
    if (!data) throw new DomainError('internal', `filesystem capture lost ${f}`);
    await writeFile(join(tmp, f), data);
  }
  await writeCaptureMeta(tmp, {
    format: CAPTURE_FORMAT,
    driver: live.handle.driver,
    runtimeVersion: FS_CAPTURE_SETTING,
    createdAt: isoTime(core.clock.now()),
    sourceId: rec.sandboxId,
    resources: live.handle.resources,
    layers: [rec.templateId],
    mounts: [],
    init: { args: [] },
    envdPort: live.handle.envdPort,
    hostname: rec.sandboxId,
    settings: { pause: FS_CAPTURE_SETTING },
    files: await listCaptureFiles(tmp),
  });
  await rename(tmp, dir);
  await run(envd, `rm -rf ${SCRATCH}`, {}, token).catch(() => undefined);
}

/**
 * Resumes a filesystem-only pause: the template started in a new slot as a create starts it, the
 * layer applied, then /init with the sandbox's id, token, variables and user. On failure nothing
 * is left.
 */
export async function restoreFilesystem(
  core: SandboxCore,
  capture: Capture | string,
  rec: SandboxRecord,
  resources: Resources,
): Promise<Live> {
  const { d } = core;
  const dir = typeof capture === 'string' ? capture : capture.dir;
  // Before anything is taken: a volume destroyed meanwhile is the client's 400.
  const binds = d.volumes.resolve(rec.volumeMounts ?? []);
  const template = await d.sources.resolve({ kind: 'template', name: rec.templateId });
  const slot = await d.slots.acquire(rec.egress);
  let handle;
  try {
    const common = { resources, net: slot, volumes: sandboxVolumes(binds) };
    handle = template.capture
      ? await d.driver.restore({ capture: template.capture, ...common })
      : await d.driver.start({ ...template.boot, ...common });
    // Before /init the fresh envd has no token yet.
    const envd = d.envd(slot.hostAddress, handle.envdPort);
    for (const f of Object.values(FS_FILES))
      await envd.writeFile(`${SCRATCH}/${f}`, await readFile(join(dir, f)), 'root');
    const r = await run(envd, RESTORE_SCRIPT, {});
    if (r.code !== 0)
      throw new DomainError('internal', `applying the filesystem failed (exit ${r.code}): ${r.stderr}`);
    await envd.init(initFor(template, rec, core.clock.now(), binds));
    return { handle, slot };
  } catch (err) {
    if (handle) await d.driver.kill(handle).catch(() => undefined);
    await core.releaseSlot(slot, rec.sandboxId);
    throw err;
  } finally {
    template.release?.();
  }
}

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { withoutSecrets } from '@agentenv/common';
import { OciError } from './errors.js';
import type { Special } from './unpack-plan.js';

/**
 * Device nodes, FIFOs and xattrs have no Node API: they are applied by one short python3 process
 * per layer (python3 is a setup.sh prerequisite). Paths are inside the layer being built, whose
 * parents were checked not to be symlinks; nothing follows a symlink.
 */
const SPECIAL_SCRIPT = `
import base64, json, os, stat, sys
root = os.geteuid() == 0
for line in sys.stdin:
    op = json.loads(line)
    p = op["path"]
    if op["op"] == "mknod":
        kind = {"c": stat.S_IFCHR, "b": stat.S_IFBLK, "p": stat.S_IFIFO}[op["kind"]]
        os.mknod(p, kind | 0o600, os.makedev(op["major"], op["minor"]))
        if root:
            os.chown(p, op["uid"], op["gid"], follow_symlinks=False)
        os.chmod(p, op["mode"])
        os.utime(p, (op["mtime"], op["mtime"]), follow_symlinks=False)
    else:
        os.setxattr(p, op["name"], base64.b64decode(op["value"]), follow_symlinks=False)
`;

/** Applies `ops` (in order) to the layer directory `target`. */
export async function applySpecials(target: string, ops: readonly Special[]): Promise<void> {
  if (ops.length === 0) return;
  const lines = ops.map(({ rel, ...op }) => JSON.stringify({ ...op, path: join(target, rel) }));
  await new Promise<void>((resolve, reject) => {
    const child = spawn('python3', ['-I', '-S', '-c', SPECIAL_SCRIPT], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: withoutSecrets(),
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
    child.on('error', (e) =>
      reject(
        new OciError('unsupported', `python3 is needed to create whiteouts and device nodes: ${e.message}`),
      ),
    );
    child.on('close', (code) => {
      if (code === 0) return resolve();
      const last = err.trim().split('\n').pop() ?? '';
      const e = new Error(`creating whiteouts/device nodes/xattrs failed: ${last}`) as NodeJS.ErrnoException;
      if (/No space left/.test(err)) e.code = 'ENOSPC';
      reject(e);
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(lines.join('\n') + '\n');
  });
}

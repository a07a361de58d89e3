import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Capture, CaptureMeta } from './capture-meta.js';
import { CaptureInvalidError } from './errors.js';

/**
 * Capture layout: `<dir>/capture.json` (CaptureMeta) beside the runtime's own files (for gVisor:
 * checkpoint.img, which holds memory and the writable layer). capture.json is written last and
 * the directory is renamed into place, so a directory with capture.json is complete.
 */
export const CAPTURE_META_FILE = 'capture.json';
export const CAPTURE_FORMAT = 'aenv-capture/1';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isPositiveNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0;
}

/** Validates parsed capture.json; throws CaptureInvalidError naming the first problem. */
export function parseCaptureMeta(value: unknown): CaptureMeta {
  const bad = (what: string): never => {
    throw new CaptureInvalidError(`capture metadata: ${what}`);
  };
  if (!isObject(value)) return bad('not an object');
  if (value.format !== CAPTURE_FORMAT) bad(`unknown format ${JSON.stringify(value.format)}`);
  for (const k of ['driver', 'runtimeVersion', 'createdAt', 'sourceId', 'hostname'] as const) {
    if (typeof value[k] !== 'string' || !value[k]) bad(`missing ${k}`);
  }
  const r = value.resources;
  if (
    !isObject(r) ||
    !isPositiveNumber(r.cpuCount) ||
    !isPositiveNumber(r.memoryMB) ||
    !isPositiveNumber(r.diskSizeMB)
  ) {
    bad('bad resources');
  }
  if (
    !Array.isArray(value.layers) ||
    value.layers.length === 0 ||
    !value.layers.every((l) => typeof l === 'string')
  ) {
    bad('bad layers');
  }
  const mounts = value.mounts;
  if (
    !Array.isArray(mounts) ||
    !mounts.every((m) => isObject(m) && typeof m.hostPath === 'string' && typeof m.sandboxPath === 'string')
  ) {
    bad('bad mounts');
  }
  const volumes = value.volumes;
  if (
    volumes !== undefined &&
    (!Array.isArray(volumes) ||
      !volumes.every((v) => isObject(v) && typeof v.name === 'string' && typeof v.hostPath === 'string'))
  )
    bad('bad volumes');
  const init = value.init;
  if (!isObject(init) || !Array.isArray(init.args) || !init.args.every((a) => typeof a === 'string'))
    bad('bad init');
  if (!Number.isInteger(value.envdPort)) bad('bad envdPort');
  if (!isObject(value.settings) || !Object.values(value.settings).every((s) => typeof s === 'string'))
    bad('bad settings');
  const files = value.files;
  if (
    !Array.isArray(files) ||
    files.length === 0 ||
    !files.every(
      (f) => isObject(f) && typeof f.name === 'string' && !f.name.includes('/') && Number.isInteger(f.bytes),
    )
  ) {
    bad('bad files');
  }
  return value as unknown as CaptureMeta;
}

/** Reads and checks a capture directory: metadata parses and every listed file has its size. */
export async function readCapture(dir: string): Promise<Capture> {
  let text: string;
  try {
    text = await readFile(join(dir, CAPTURE_META_FILE), 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CaptureInvalidError(
      code === 'ENOENT'
        ? `no capture at ${dir} (missing ${CAPTURE_META_FILE})`
        : `cannot read capture ${dir}: ${code}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CaptureInvalidError(`capture ${dir}: ${CAPTURE_META_FILE} is not valid JSON`);
  }
  const meta = parseCaptureMeta(parsed);
  for (const f of meta.files) {
    const st = await stat(join(dir, f.name)).catch(() => null);
    if (!st?.isFile()) throw new CaptureInvalidError(`capture ${dir}: missing ${f.name}`);
    if (st.size !== f.bytes) {
      throw new CaptureInvalidError(`capture ${dir}: ${f.name} has ${st.size} bytes, expected ${f.bytes}`);
    }
  }
  return { dir, meta };
}

/** Lists the runtime's files in a capture directory being assembled, with their sizes. */
export async function listCaptureFiles(dir: string): Promise<{ name: string; bytes: number }[]> {
  const out: { name: string; bytes: number }[] = [];
  for (const name of (await readdir(dir)).sort()) {
    if (name === CAPTURE_META_FILE) continue;
    const st = await stat(join(dir, name));
    if (st.isFile()) out.push({ name, bytes: st.size });
  }
  return out;
}

export async function writeCaptureMeta(dir: string, meta: CaptureMeta): Promise<void> {
  await writeFile(join(dir, CAPTURE_META_FILE), JSON.stringify(meta, null, 2));
}

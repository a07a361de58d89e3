import { OciError } from './errors.js';
import type { TarHeader } from './tar-header.js';

/**
 * What unpacking a layer does to its directory, decided without touching it: each archive entry
 * becomes a list of filesystem steps (relative paths), and device nodes, xattrs and directory
 * times are collected to be applied after the last entry. The planner keeps what the layer has
 * created so far, which is all it needs to refuse an entry that would leave the layer (beneath a
 * symlink, a hard link to outside) and to replace earlier entries the way Docker does.
 */

/** AUFS/OCI whiteout markers inside layer archives. */
export const WHITEOUT_PREFIX = '.wh.';
export const OPAQUE_MARKER = '.wh..wh..opq';
/** The xattr overlayfs reads to hide a lower directory's contents. */
export const OVERLAY_OPAQUE_XATTR = 'trusted.overlay.opaque';

/**
 * Splits an archive path into components, refusing anything that could land outside the layer:
 * absolute paths, `..` components, NUL bytes. `./a//b/` → ['a', 'b']; the root itself → [].
 */
export function safeComponents(path: string): string[] {
  if (path.includes('\0')) throw new OciError('unsafe_layer', `layer entry "${path}" contains a NUL byte`);
  if (path.startsWith('/')) throw new OciError('unsafe_layer', `layer entry "${path}" is an absolute path`);
  const parts = path.split('/').filter((c) => c !== '' && c !== '.');
  if (parts.includes('..'))
    throw new OciError('unsafe_layer', `layer entry "${path}" escapes the layer (..)`);
  return parts;
}

/** xattrs an image may carry into a layer; trusted.* (overlayfs control) and others are dropped. */
function keptXattr(name: string): boolean {
  return name === 'security.capability' || name.startsWith('user.');
}

export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

/** One filesystem change, at a path relative to the layer directory. */
export type Step =
  /** A new directory, private until `attrs` gives it its mode. */
  | { readonly op: 'mkdir'; readonly rel: string }
  /** Mode, and the owner when there is one (applied only when unpacking as root). */
  | { readonly op: 'attrs'; readonly rel: string; readonly mode: number; readonly owner?: Owner }
  /** What an earlier entry created there: a whole directory, or one file, symlink or link. */
  | { readonly op: 'remove'; readonly rel: string; readonly dir: boolean }
  /** A new regular file holding the entry's body. */
  | {
      readonly op: 'file';
      readonly rel: string;
      readonly mode: number;
      readonly owner: Owner;
      readonly mtime: number;
    }
  | {
      readonly op: 'symlink';
      readonly rel: string;
      readonly target: string;
      readonly owner: Owner;
      readonly mtime: number;
    }
  /** A hard link to `target`, created earlier in this layer. */
  | { readonly op: 'link'; readonly rel: string; readonly target: string };

/** Changes Node has no API for, applied after the last entry (see unpack-specials.ts). */
export type Special =
  | {
      readonly op: 'mknod';
      readonly rel: string;
      readonly kind: 'c' | 'b' | 'p';
      readonly major: number;
      readonly minor: number;
      readonly mode: number;
      readonly uid: number;
      readonly gid: number;
      readonly mtime: number;
    }
  | { readonly op: 'xattr'; readonly rel: string; readonly name: string; readonly value: string };

export interface LayerTotals {
  /** Disk use of the unpacked files (file sizes rounded up to 4 KiB blocks, plus directories). */
  readonly bytes: number;
  readonly whiteouts: number;
  readonly opaqueDirs: number;
  /** The layer hides everything below it (an opaque marker at its root). */
  readonly rootOpaque: boolean;
}

export interface LayerFinish {
  /** Device nodes first, then xattrs (an opaque directory may hold whiteouts). */
  readonly specials: Special[];
  /** Deepest first: creating entries inside a directory changes its mtime. */
  readonly dirTimes: [rel: string, mtime: number][];
  readonly totals: LayerTotals;
}

/** What exists at a path: 'node' is a device node (or whiteout) still queued as a Special. */
type Created = 'dir' | 'symlink' | 'file' | 'node';

const BLOCK = 4096;
const join = (parent: string, name: string) => (parent ? `${parent}/${name}` : name);
const ownerOf = (h: TarHeader): Owner => ({ uid: h.uid, gid: h.gid });

/** The planner for one layer; feed it every entry in archive order, then call finish(). */
export class LayerPlanner {
  readonly #created = new Map<string, Created>();
  readonly #specials = new Map<string, Special[]>();
  readonly #dirTimes = new Map<string, number>();
  #bytes = 0;
  #whiteouts = 0;
  #opaqueDirs = 0;
  #rootOpaque = false;

  /** The steps for one entry, in order. Throws OciError('unsafe_layer') for an entry that may not be. */
  entry(h: TarHeader): Step[] {
    const parts = safeComponents(h.path);
    if (parts.length === 0) return []; // the layer root itself: nothing to create
    const steps = this.#parents(parts, h.path);
    const base = parts[parts.length - 1]!;
    const parent = parts.slice(0, -1).join('/');
    if (base.startsWith(WHITEOUT_PREFIX)) {
      this.#whiteout(h, parent, base, steps);
      return steps;
    }
    const rel = parts.join('/');
    switch (h.type) {
      case 'dir':
        this.#directory(h, rel, steps);
        break;
      case 'file':
        this.#clear(rel, false, steps);
        steps.push({ op: 'file', rel, mode: h.mode, owner: ownerOf(h), mtime: h.mtime });
        this.#created.set(rel, 'file');
        this.#bytes += Math.ceil(h.size / BLOCK) * BLOCK;
        break;
      case 'symlink':
        this.#clear(rel, false, steps);
        steps.push({ op: 'symlink', rel, target: h.linkname, owner: ownerOf(h), mtime: h.mtime });
        this.#created.set(rel, 'symlink');
        return steps; // no xattrs on symlinks
      case 'link':
        this.#hardLink(h, rel, steps);
        return steps;
      case 'char':
      case 'block':
      case 'fifo':
        this.#clear(rel, false, steps);
        this.#created.set(rel, 'node');
        this.#queue(rel, {
          op: 'mknod',
          rel,
          kind: h.type === 'char' ? 'c' : h.type === 'block' ? 'b' : 'p',
          major: h.devmajor,
          minor: h.devminor,
          mode: h.mode,
          uid: h.uid,
          gid: h.gid,
          mtime: h.mtime,
        });
        break;
    }
    for (const [name, value] of h.xattrs) {
      if (keptXattr(name)) this.#queue(rel, { op: 'xattr', rel, name, value: value.toString('base64') });
    }
    return steps;
  }

  finish(): LayerFinish {
    const specials = [...this.#specials.values()].flat();
    specials.sort((a, b) => (a.op === b.op ? 0 : a.op === 'mknod' ? -1 : 1));
    const depth = (rel: string) => rel.split('/').length;
    const dirTimes = [...this.#dirTimes].sort((a, b) => depth(b[0]) - depth(a[0]));
    const totals = {
      bytes: this.#bytes,
      whiteouts: this.#whiteouts,
      opaqueDirs: this.#opaqueDirs,
      rootOpaque: this.#rootOpaque,
    };
    return { specials, dirTimes, totals };
  }

  /** Creates the parent directories of `parts`, refusing to pass through a symlink or a non-directory. */
  #parents(parts: string[], raw: string): Step[] {
    const steps: Step[] = [];
    let rel = '';
    for (const part of parts.slice(0, -1)) {
      rel = join(rel, part);
      const kind = this.#created.get(rel);
      if (kind === 'dir') continue;
      if (kind === 'symlink') {
        throw new OciError('unsafe_layer', `layer entry "${raw}" goes through the symlink ${rel}`);
      }
      if (kind === 'file')
        throw new OciError('unsafe_layer', `layer entry "${raw}": ${rel} is not a directory`);
      this.#specials.delete(rel); // a queued whiteout or device node gives way to the directory
      // 0755 whatever the umask, as Docker creates missing parents.
      steps.push({ op: 'mkdir', rel }, { op: 'attrs', rel, mode: 0o755 });
      this.#created.set(rel, 'dir');
    }
    return steps;
  }

  /** Makes room for a new entry at rel; true when a directory is there and the entry is one too. */
  #clear(rel: string, dir: boolean, steps: Step[]): boolean {
    const kind = this.#created.get(rel);
    if (!kind) return false;
    if (kind === 'dir' && dir) return true;
    if (kind !== 'node') steps.push({ op: 'remove', rel, dir: kind === 'dir' });
    for (const m of [this.#created, this.#specials, this.#dirTimes] as Map<string, unknown>[]) {
      for (const k of m.keys()) if (k === rel || k.startsWith(`${rel}/`)) m.delete(k);
    }
    return false;
  }

  #queue(rel: string, op: Special): void {
    const list = this.#specials.get(rel) ?? [];
    list.push(op);
    this.#specials.set(rel, list);
  }

  /** `.wh.name` becomes a 0/0 character device `name`; `.wh..wh..opq` makes its directory opaque. */
  #whiteout(h: TarHeader, parent: string, base: string, steps: Step[]): void {
    if (base === OPAQUE_MARKER) {
      // overlayfs ignores opacity on a layer's root, so that case is reported and the caller
      // drops the layers below instead.
      if (parent)
        this.#queue(parent, { op: 'xattr', rel: parent, name: OVERLAY_OPAQUE_XATTR, value: 'eQ==' });
      else this.#rootOpaque = true;
      this.#opaqueDirs++;
      return;
    }
    if (base.startsWith(`${WHITEOUT_PREFIX}${WHITEOUT_PREFIX}`)) return; // AUFS metadata (.wh..wh.plnk, …)
    const name = base.slice(WHITEOUT_PREFIX.length);
    if (!name || name === '.' || name === '..')
      throw new OciError('unsafe_layer', `bad whiteout "${h.path}"`);
    const rel = join(parent, name);
    this.#clear(rel, false, steps);
    this.#created.set(rel, 'node');
    this.#queue(rel, {
      op: 'mknod',
      rel,
      kind: 'c',
      major: 0,
      minor: 0,
      mode: 0,
      uid: 0,
      gid: 0,
      mtime: h.mtime,
    });
    this.#whiteouts++;
  }

  #directory(h: TarHeader, rel: string, steps: Step[]): void {
    if (!this.#clear(rel, true, steps)) {
      steps.push({ op: 'mkdir', rel });
      this.#created.set(rel, 'dir');
      this.#bytes += BLOCK;
    }
    steps.push({ op: 'attrs', rel, mode: h.mode, owner: ownerOf(h) });
    this.#dirTimes.set(rel, h.mtime);
  }

  /** A hard link must point to a non-directory this layer extracted, reached through no symlink. */
  #hardLink(h: TarHeader, rel: string, steps: Step[]): void {
    const targetParts = safeComponents(h.linkname);
    const target = targetParts.join('/');
    for (let i = 1; i < targetParts.length; i++) {
      if (this.#created.get(targetParts.slice(0, i).join('/')) === 'symlink')
        throw new OciError('unsafe_layer', `hard link "${h.path}" goes through a symlink`);
    }
    const kind = this.#created.get(target);
    if (!kind)
      throw new OciError('unsafe_layer', `hard link "${h.path}" points outside the layer ("${h.linkname}")`);
    if (kind === 'dir') throw new OciError('unsafe_layer', `hard link "${h.path}" points to a directory`);
    if (target === rel) return;
    this.#clear(rel, false, steps);
    const pending = this.#specials.get(target)?.find((o) => o.op === 'mknod');
    if (pending) this.#queue(rel, { ...pending, rel });
    else steps.push({ op: 'link', rel, target });
    this.#created.set(rel, kind);
  }
}

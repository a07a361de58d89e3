import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { lchown, mkdir, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { conflict, DomainError, newSandboxId } from '@agentenv/common';
import { KeyedMutex } from '../util/index.js';
import { DEFAULT_OWNER } from './content.js';
import { isMountPoint, makeImage, mountImage, unmountImage } from './image.js';
import { checkVolumeName } from './rules.js';

/** One volume as the node keeps it (`volume.json` beside its `data/` directory). */
export interface VolumeInfo {
  readonly volumeID: string;
  readonly name: string;
  /** Bearer token of the content API for this volume. */
  readonly token: string;
  readonly createdAt: string;
}

const META = 'volume.json';
const DATA = 'data';
const IMAGE = 'volume.img';

const ID = /^vol[a-z0-9]{17}$/;

export interface VolumeStoreOptions {
  /**
   * `image` (default): each volume is a filesystem image of its quota (image.ts) mounted at its
   * `data/`, so sandbox writes are bounded too. `directory`: `data/` is a plain directory, which
   * only the content API's own accounting bounds (for tests on machines without loop devices).
   */
  backing?: 'image' | 'directory';
}

/**
 * Volumes under one root: `<root>/<volumeID>/{volume.json,volume.img,data/}`. The root may be a
 * shared posix_fs path, so any node that mounts it serves the same volumes; nothing is cached,
 * so what another node creates or destroys is seen at once. An image is mounted on one node at a
 * time (the first to attach it; see image.ts).
 */
export class VolumeStore {
  /** Creates under way here, so two concurrent creates of one name conflict. */
  private readonly creating = new Set<string>();
  /** Attaching and detaching one volume's image run one at a time. */
  private readonly mounting = new KeyedMutex();
  private readonly backing: 'image' | 'directory';

  constructor(
    readonly root: string,
    opts: VolumeStoreOptions = {},
  ) {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    this.backing = opts.backing ?? 'image';
  }

  list(): VolumeInfo[] {
    return readdirSync(this.root)
      .map((id) => this.find(id))
      .filter((v): v is VolumeInfo => v !== undefined)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  private find(volumeID: string): VolumeInfo | undefined {
    return ID.test(volumeID) ? readMeta(path.join(this.root, volumeID)) : undefined;
  }

  /** A new volume; with image backing, its image holds `quotaBytes` (what sandboxes can write). */
  async create(name: string, quotaBytes: number): Promise<VolumeInfo> {
    checkVolumeName(name);
    if (this.creating.has(name) || this.findByName(name)) throw conflict(`volume ${name} already exists`);
    const v: VolumeInfo = {
      volumeID: 'vol' + newSandboxId(17),
      name,
      token: randomBytes(32).toString('base64url'),
      createdAt: new Date().toISOString(),
    };
    this.creating.add(name);
    const dir = path.join(this.root, v.volumeID);
    try {
      await this.makeData(dir, quotaBytes);
      const tmp = path.join(dir, `${META}.tmp`);
      await writeFile(tmp, JSON.stringify(v), { mode: 0o600 });
      await rename(tmp, path.join(dir, META));
    } catch (err) {
      await this.release(dir).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
      throw err;
    } finally {
      this.creating.delete(name);
    }
    return v;
  }

  private async makeData(dir: string, quotaBytes: number): Promise<void> {
    const data = path.join(dir, DATA);
    await mkdir(data, { recursive: true, mode: 0o755 });
    // Sandboxes' default user owns the root, so agents can write a fresh volume.
    await lchown(data, DEFAULT_OWNER.uid, DEFAULT_OWNER.gid);
    if (this.backing === 'directory') return;
    await makeImage(path.join(dir, IMAGE), quotaBytes, DEFAULT_OWNER);
    await mountImage(path.join(dir, IMAGE), data).catch((err: unknown) => {
      throw new DomainError(
        'internal',
        "this node cannot mount volume images (ext4 images on loop devices: is /dev/loop-control there?); the node's log has mount's output",
        undefined,
        { cause: err },
      );
    });
    // A fresh filesystem that no sandbox has seen yet: its lost+found is no file of the user's.
    await rmdir(path.join(data, 'lost+found'));
  }

  /** By id; a 404 naming it when unknown. */
  get(volumeID: string): VolumeInfo {
    const v = this.find(volumeID);
    if (!v) throw new DomainError('not_found', `volume ${volumeID} not found`);
    return v;
  }

  findByName(name: string): VolumeInfo | undefined {
    return this.list().find((v) => v.name === name);
  }

  /** The volume a content-API request may use: its token must match (401 otherwise). */
  authorize(volumeID: string, authorization: string | undefined): VolumeInfo {
    const v = this.find(volumeID);
    const given = /^Bearer (.+)$/i.exec(authorization ?? '')?.[1];
    if (!v || !given || !sameSecret(given, v.token))
      throw new DomainError('unauthorized', 'invalid or missing volume token');
    return v;
  }

  /**
   * Host directory holding the volume's files (what sandboxes bind-mount), which must be
   * attached already: a 409 when its image is not mounted here (e.g. another node has it).
   */
  dataDir(v: VolumeInfo): string {
    const dir = path.join(this.root, v.volumeID);
    if (existsSync(path.join(dir, IMAGE)) && !isMountPoint(path.join(dir, DATA)))
      throw conflict(`volume ${v.name} is not attached on this node`);
    return path.join(dir, DATA);
  }

  /** The volume's data directory, its image mounted first when it is not. */
  async attach(v: VolumeInfo): Promise<string> {
    const dir = path.join(this.root, v.volumeID);
    const data = path.join(dir, DATA);
    await this.mounting.run(v.volumeID, async () => {
      if (existsSync(path.join(dir, IMAGE)) && !isMountPoint(data))
        await mountImage(path.join(dir, IMAGE), data);
    });
    return data;
  }

  /**
   * Mounts every volume's image (node start: sandboxes resumed from a capture bind their volume
   * directories again, which must not be the empty mount points). A volume that cannot be
   * attached (another node has it) stays detached, and says so when used.
   */
  async attachAll(): Promise<void> {
    for (const v of this.list()) await this.attach(v).catch(() => undefined);
  }

  /** Unmounts every volume's image (node stop). */
  async detachAll(): Promise<void> {
    for (const v of this.list()) await this.release(path.join(this.root, v.volumeID));
  }

  private async release(dir: string): Promise<void> {
    const data = path.join(dir, DATA);
    await this.mounting.run(path.basename(dir), async () => {
      if (isMountPoint(data)) await unmountImage(data);
    });
  }

  /** False when unknown. The files are removed with it, its image unmounted first. */
  async destroy(volumeID: string): Promise<boolean> {
    if (!this.find(volumeID)) return false;
    const dir = path.join(this.root, volumeID);
    await this.release(dir);
    // Never recursing into a filesystem sandboxes still write.
    if (isMountPoint(path.join(dir, DATA))) throw new Error(`volume ${volumeID} is still mounted`);
    // The metadata goes first, so a crash mid-removal never leaves a half-deleted volume listed.
    await rm(path.join(dir, META), { force: true });
    await rm(dir, { recursive: true, force: true });
    return true;
  }
}

function readMeta(dir: string): VolumeInfo | undefined {
  try {
    const v = JSON.parse(readFileSync(path.join(dir, META), 'utf8')) as VolumeInfo;
    return typeof v.volumeID === 'string' && typeof v.token === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

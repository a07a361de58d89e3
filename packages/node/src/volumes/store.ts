import { randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { lchown, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { conflict, DomainError } from '@agentenv/common';
import { newSandboxId } from '../util/index.js';
import { DEFAULT_OWNER } from './content.js';
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

const ID = /^vol[a-z0-9]{17}$/;

/**
 * Volumes as directories under one root: `<root>/<volumeID>/{volume.json,data/}`. The root may
 * be a shared posix_fs path, so any node that mounts it serves the same volumes; nothing is
 * cached, so what another node creates or destroys is seen at once.
 */
export class VolumeStore {
  /** Creates under way here, so two concurrent creates of one name conflict. */
  private readonly creating = new Set<string>();

  constructor(readonly root: string) {
    mkdirSync(root, { recursive: true, mode: 0o700 });
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

  async create(name: string): Promise<VolumeInfo> {
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
      await mkdir(path.join(dir, DATA), { recursive: true, mode: 0o755 });
      // Sandboxes' default user owns the root, so agents can write a fresh volume.
      await lchown(path.join(dir, DATA), DEFAULT_OWNER.uid, DEFAULT_OWNER.gid);
      const tmp = path.join(dir, `${META}.tmp`);
      await writeFile(tmp, JSON.stringify(v), { mode: 0o600 });
      await rename(tmp, path.join(dir, META));
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    } finally {
      this.creating.delete(name);
    }
    return v;
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

  /** Host directory holding the volume's files (what sandboxes bind-mount). */
  dataDir(v: VolumeInfo): string {
    return path.join(this.root, v.volumeID, DATA);
  }

  /** False when unknown. The files are removed with it. */
  async destroy(volumeID: string): Promise<boolean> {
    if (!this.find(volumeID)) return false;
    const dir = path.join(this.root, volumeID);
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

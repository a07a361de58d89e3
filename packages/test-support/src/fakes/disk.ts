import type { CaptureMeta, Resources } from '@agentenv/node';

/** What a fake capture holds: its metadata and the sandbox state it froze. */
export interface FakeCapture {
  readonly meta: CaptureMeta;
  /** The captured sandbox's memory and files, as keys and values. */
  readonly state: Readonly<Record<string, string>>;
  /** False for a capture cut short (no capture.json yet). */
  readonly complete: boolean;
}

export function fakeCaptureMeta(sourceId: string, resources: Resources, createdAt: string): CaptureMeta {
  return {
    format: 'aenv-capture/1',
    driver: 'fake',
    runtimeVersion: 'fake-1',
    createdAt,
    sourceId,
    resources,
    layers: ['/fake/rootfs'],
    mounts: [],
    init: { args: ['/opt/aenv/bin/envd'] },
    envdPort: 49983,
    hostname: 'sandbox',
    settings: {},
    files: [{ name: 'checkpoint.img', bytes: 1 }],
  };
}

/**
 * A node's disk as the fakes see it: capture directories by path. The fake driver writes
 * captures here, the fake capture directories, pauses and snapshot catalogue read and move them.
 */
export class FakeDisk {
  private readonly dirs = new Map<string, FakeCapture>();

  write(dir: string, capture: FakeCapture): void {
    this.dirs.set(dir, capture);
  }

  read(dir: string): FakeCapture | undefined {
    return this.dirs.get(dir);
  }

  has(dir: string): boolean {
    return this.dirs.has(dir);
  }

  delete(dir: string): void {
    this.dirs.delete(dir);
  }

  /** Removes every directory at or below `prefix`. */
  deleteUnder(prefix: string): void {
    for (const d of this.list(prefix)) this.dirs.delete(d);
  }

  move(from: string, to: string): void {
    const c = this.dirs.get(from);
    if (!c) throw new Error(`fake disk: no ${from}`);
    this.dirs.delete(from);
    this.dirs.set(to, c);
  }

  /** Directories at or below `prefix`, sorted. */
  list(prefix = ''): string[] {
    const p = prefix.endsWith('/') || prefix === '' ? prefix : `${prefix}/`;
    return [...this.dirs.keys()].filter((d) => d === prefix || d.startsWith(p)).sort();
  }
}

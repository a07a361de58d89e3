import { DEFAULT_RESOURCES } from '@agentenv/node';
import {
  type ImageSource,
  type NamedSource,
  type ResolvedTemplate,
  type SandboxSource,
} from '@agentenv/node/server';
import { fakeCaptureMeta, type FakeDisk } from './disk.js';

/**
 * Templates with a captured ready state on a FakeDisk (`/templates/<name>-<build>`), as a link of
 * the real source chain; `rebuild` gives a template a new capture, `remove` deletes it.
 */
export class FakeTemplates implements NamedSource {
  private readonly builds = new Map<string, number>();

  constructor(
    private readonly disk: FakeDisk,
    names: readonly string[] = ['base'],
  ) {
    for (const n of names) this.rebuild(n);
  }

  static dir(name: string, build: number): string {
    return `/templates/${name}-${build}`;
  }

  /** A new build of `name` (a new capture); the previous one is gone, as a rebuilt template's is. */
  rebuild(name: string, state: Record<string, string> = {}): string {
    const prev = this.builds.get(name);
    if (prev !== undefined) this.disk.delete(FakeTemplates.dir(name, prev));
    const build = (prev ?? 0) + 1;
    this.builds.set(name, build);
    const dir = FakeTemplates.dir(name, build);
    const meta = fakeCaptureMeta(`template-${name}`, DEFAULT_RESOURCES, '2026-01-01T00:00:00.000Z');
    this.disk.write(dir, { meta, state: { template: name, ...state }, complete: true });
    return dir;
  }

  remove(name: string): void {
    const build = this.builds.get(name);
    if (build !== undefined) this.disk.delete(FakeTemplates.dir(name, build));
    this.builds.delete(name);
  }

  async find(name: string): Promise<ResolvedTemplate | undefined> {
    const build = this.builds.get(name);
    if (build === undefined) return undefined;
    const dir = FakeTemplates.dir(name, build);
    return {
      templateId: name,
      alias: name,
      capture: { dir, meta: this.disk.read(dir)!.meta },
      defaults: DEFAULT_RESOURCES,
      sandboxDefaults: { user: 'user' },
      envdVersion: '0.6.4',
    };
  }
}

/** Cold images: any image boots (the fake driver's start), with the resources asked for. */
export const fakeImages: ImageSource = {
  async resolve(req: Extract<SandboxSource, { kind: 'image' }>): Promise<ResolvedTemplate> {
    return {
      templateId: req.image,
      boot: { layers: ['/fake/image'], init: { args: ['/opt/aenv/bin/envd'] }, envdPort: 49983 },
      defaults: req.resources,
      envdVersion: '0.6.4',
      sandboxDefaults: { user: 'root' },
    };
  },
};

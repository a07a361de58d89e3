import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { errorBody } from '@agentenv/common';
import { fakeCaptureMeta, MemoryObjectRepository, rejection as failure } from '@agentenv/test-support/fakes';
import { DEFAULT_RESOURCES } from '../../src/runtime/index.js';
import { RuntimeCache, SnapshotStore, writeCaptureMeta } from '@agentenv/snapshot';
import { BuiltTemplates } from '../../src/templates/built.js';
import { StepError, type BuildRunner } from '../../src/templates/builds/index.js';
import { Limiter } from '@agentenv/common';

let work: string;
let repository: MemoryObjectRepository;
let templates: BuiltTemplates;
let builds = 0;
/** What the next build does: succeed, or fail at a step. */
let nextBuild: 'ok' | 'fail' = 'ok';

/** A build runner that writes a small ready-state capture (a real one, files and capture.json). */
const runner: Pick<BuildRunner, 'run'> = {
  async run(spec) {
    if (nextBuild === 'fail') throw new StepError(2, 'RUN false: exit code 1');
    const dir = join(work, 'builds', `b${++builds}`);
    await mkdir(dir, { recursive: true });
    const image = Buffer.from(`ready state of build ${builds}`);
    await writeFile(join(dir, 'checkpoint.img'), image);
    await writeCaptureMeta(dir, {
      ...fakeCaptureMeta(`build-${builds}`, DEFAULT_RESOURCES, new Date().toISOString()),
      files: [{ name: 'checkpoint.img', bytes: image.length }],
    });
    return {
      captureDir: dir,
      defaults: { user: 'app', workdir: '/app' },
      source: { image: spec.fromImage! },
    };
  },
};

async function build(name: string, tags?: string[]) {
  const r = await templates.register({ name, ...(tags ? { tags } : {}), memoryMB: 512 });
  templates.trigger(r.templateID, r.buildID, { fromImage: 'python:3.12', steps: [] });
  for (;;) {
    const s = await templates.status(r.templateID, r.buildID, 0);
    if (s.status === 'ready' || s.status === 'error') return { ...r, status: s };
    await new Promise((res) => setImmediate(res));
  }
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'aenv-built-'));
  repository = new MemoryObjectRepository();
  const store = new SnapshotStore({ repository });
  const cache = new RuntimeCache({ dir: join(work, 'cache'), capacityBytes: 2 ** 30, store });
  await cache.open();
  templates = new BuiltTemplates({
    store,
    cache,
    runner,
    queue: new Limiter(2),
    envdVersion: '0.6.4',
    logger: pino({ level: 'silent' }),
  });
});

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

describe('built templates (over an in-memory snapshot repository)', () => {
  it('builds, stores the ready state and finds it by id, name and name:tag', async () => {
    const b = await build('app', ['v1']);
    expect(b.names).toEqual(['app', 'app:v1']);
    expect(b.status.status).toBe('ready');
    for (const key of [b.templateID, 'app', 'app:v1']) {
      const t = await templates.find(key);
      expect(t, key).toMatchObject({
        templateId: b.templateID,
        alias: 'app',
        defaults: { memoryMB: 512 },
        sandboxDefaults: { user: 'app', workdir: '/app' },
      });
      expect(t!.capture!.meta.sourceId).toBe('build-1');
      t!.release?.();
    }
    expect(await templates.find('other')).toBeUndefined();
    expect((await templates.get('app'))?.builds).toHaveLength(1);
    expect((await templates.list()).map((t) => t.templateID)).toEqual([b.templateID]);
  });

  it('a rebuild replaces the build its name points to; a build a tag still names is kept', async () => {
    const first = await templates.find('app');
    first!.release?.();
    await templates.assignTags('app', ['stable']);
    const again = await build('app');
    const app = await templates.find('app');
    const stable = await templates.find('app:stable');
    expect(app!.templateId).toBe(again.templateID);
    expect(app!.capture!.meta.sourceId).toBe('build-2');
    expect(stable!.capture!.meta.sourceId).toBe('build-1');
    app!.release?.();
    stable!.release?.();
    expect((await templates.tags('app')).map((t) => t.tag)).toEqual(['stable', 'v1']);
    await templates.removeTags('app', ['stable', 'v1']);
    const third = await build('app');
    expect(third.status.status).toBe('ready');
    // Nothing names builds 1 and 2 any more: only the newest is stored.
    expect(repository.keys('records/')).toHaveLength(1);
  });

  it('reports a failed build with its step, and keeps what was there', async () => {
    nextBuild = 'fail';
    try {
      const b = await build('app');
      expect(b.status).toMatchObject({
        status: 'error',
        reason: { step: '2', message: 'RUN false: exit code 1' },
      });
    } finally {
      nextBuild = 'ok';
    }
    const t = await templates.find('app');
    expect(t!.capture!.meta.sourceId).toBe('build-3');
    t!.release?.();
  });

  it('refuses a build started twice, a bad spec and unknown builds or templates', async () => {
    const r = await templates.register({ name: 'other' });
    expect(() =>
      templates.trigger(r.templateID, r.buildID, { fromImage: 'a', fromTemplate: 'b', steps: [] }),
    ).toThrow(/exactly one of fromImage and fromTemplate/);
    templates.trigger(r.templateID, r.buildID, { fromTemplate: 'base', steps: [] });
    expect(
      errorBody(
        getError(() => templates.trigger(r.templateID, r.buildID, { fromTemplate: 'base', steps: [] })),
      ).status,
    ).toBe(409);
    expect(errorBody(await failure(templates.status(r.templateID, 'nope', 0))).status).toBe(404);
    expect(errorBody(await failure(templates.assignTags('nope', ['x']))).status).toBe(404);
  });

  it('deletes every build of a template and its names', async () => {
    expect(await templates.delete('app')).toBe(true);
    expect(await templates.find('app')).toBeUndefined();
    expect(await templates.delete('app')).toBe(false);
  });
});

function getError(f: () => void): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  return expect.fail('expected a failure');
}

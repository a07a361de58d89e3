/**
 * Templates from images and builds, end to end: images made here and pushed to Debian's
 * docker-registry on 127.0.0.1, built with the official E2B SDK's Template API against the node,
 * sandboxes from the result; and sandboxes straight from an image (POST /sandboxes-cold).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Template, type LogEntry } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  baseLayer,
  imageBlobs,
  ociImage,
  shellLayer,
  skopeoPush,
  tarOf,
  writeLayout,
  startRegistry,
  type TestRegistry,
} from '@agentenv/test-support/oci';
import { eventually } from '@agentenv/test-support';
import { api, useTestServer } from '@agentenv/test-support/server';

useTestServer();

let reg: TestRegistry;
let work: string;
const image = (name: string) => `${reg.host}/test/${name}:1`;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'aenv-templates-'));
  reg = await startRegistry();
  const shared = [await baseLayer(), await shellLayer()];
  const app = ociImage([...shared, await tarOf([{ name: 'srv/app.txt', content: 'app\n' }])], {
    env: ['PATH=/bin:/usr/bin', 'GREETING=hi'],
    workingDir: '/srv',
  });
  const other = ociImage([...shared, await tarOf([{ name: 'srv/other.txt', content: 'other\n' }])], {
    env: ['PATH=/bin:/usr/bin'],
    user: '1000',
  });
  await writeLayout(join(work, 'layout'), [
    { tag: 'app', top: app.manifest, blobs: imageBlobs(app) },
    { tag: 'other', top: other.manifest, blobs: imageBlobs(other) },
  ]);
  await skopeoPush(join(work, 'layout'), 'app', image('app'));
  await skopeoPush(join(work, 'layout'), 'other', image('other'));
  await writeFile(join(work, 'hello.txt'), 'hello from the build context\n');
});

afterAll(async () => {
  for (const name of ['tpl-app', 'tpl-other'])
    await api('DELETE', `/templates/${name}`).catch(() => undefined);
  await reg?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('template builds with the E2B SDK', () => {
  it('builds from an image with RUN, WORKDIR, ENV, COPY, USER and a start command', async () => {
    const logs: string[] = [];
    const template = Template({ fileContextPath: work })
      .fromImage(image('app'))
      .runCmd('echo built-as-$(whoami) > /srv/built.txt')
      .setWorkdir('/work')
      .setEnvs({ FOO: 'bar', BOTH: '$GREETING-$FOO' })
      .copy('hello.txt', '/work/hello.txt', { user: 'user', mode: 0o640 })
      .setUser('user')
      .runCmd('id -un > /tmp/step-user; pwd > /tmp/step-dir')
      .setStartCmd('echo started > /tmp/started; exec sleep 3600', 'test -f /tmp/started');
    await Template.build(template, 'tpl-app', { onBuildLogs: (e: LogEntry) => logs.push(e.message) });
    expect(logs.join('\n')).toMatch(/ready/);

    const found = await api('GET', '/templates/aliases/tpl-app');
    expect(found.status).toBe(200);
    const list = await api('GET', '/templates');
    expect(list.json.map((t: { names: string[] }) => t.names[0])).toContain('tpl-app');

    const sbx = await Sandbox.create('tpl-app');
    try {
      const r = await sbx.commands.run(
        'cat /srv/built.txt hello.txt /tmp/step-user /tmp/step-dir /tmp/started; echo $FOO $BOTH $GREETING; pwd; whoami; ls -l hello.txt; ps | grep -c "[s]leep 3600"',
      );
      const [built, hello, stepUser, stepDir, started, env, pwd, who, ls, running] = r.stdout.split('\n');
      expect([built, hello, stepUser, stepDir, started]).toEqual([
        'built-as-root',
        'hello from the build context',
        'user',
        '/work',
        'started',
      ]);
      expect([env, pwd, who, running]).toEqual(['bar hi-bar hi', '/work', 'user', '1']);
      expect(ls).toMatch(/^-rw-r-----\s+1 user\s/);
    } finally {
      await sbx.kill();
    }
  });

  it('assigns, lists and removes tags with the SDK', async () => {
    const assigned = await Template.assignTags('tpl-app', ['prod', 'stable']);
    expect(assigned.tags).toEqual(['prod', 'stable']);
    const { templateID } = (await api('GET', '/templates/aliases/tpl-app')).json as { templateID: string };
    const tags = await Template.getTags(templateID);
    expect(tags.map((t) => t.tag)).toEqual(expect.arrayContaining(['prod', 'stable']));
    expect(new Set(tags.map((t) => t.buildID)).size).toBe(1);
    const sbx = await Sandbox.create('tpl-app:prod');
    await sbx.kill();
    await Template.removeTags('tpl-app', 'prod');
    expect((await api('GET', '/templates/aliases/tpl-app:prod')).status).toBe(404);
    expect((await api('GET', '/templates/aliases/tpl-app:stable')).status).toBe(200);
    expect((await api('POST', '/templates/tags', { target: 'no-such-template', tags: ['x'] })).status).toBe(
      404,
    );
  });

  it('reports a failing RUN as an error status with the step and its log', async () => {
    const logs: string[] = [];
    const template = Template().fromImage(image('app')).runCmd('echo before-the-failure; exit 3');
    await expect(
      Template.build(template, 'tpl-fail', { onBuildLogs: (e: LogEntry) => logs.push(e.message) }),
    ).rejects.toThrow(/exit code 3/);
    expect(logs.join('\n')).toContain('before-the-failure');
    await api('DELETE', '/templates/tpl-fail');
  });

  it('maps a numeric image USER and reuses shared layers for a second template', async () => {
    const logs: string[] = [];
    await Template.build(Template().fromImage(image('other')), 'tpl-other', {
      onBuildLogs: (e: LogEntry) => logs.push(e.message),
    });
    // The base and tools layers came from the first image's pull: only the top layer is new.
    const pulled = /(\d+) of (\d+) bytes downloaded/.exec(logs.join('\n'));
    expect(pulled).not.toBeNull();
    expect(Number(pulled![1])).toBeLessThan(Number(pulled![2]) / 10);
    const sbx = await Sandbox.create('tpl-other');
    try {
      expect((await sbx.commands.run('whoami; cat /srv/other.txt')).stdout).toBe('user\nother\n');
    } finally {
      await sbx.kill();
    }
  });

  it('builds from the base template over the REST API (fromTemplate), and forks keep its user', async () => {
    const reg = await api('POST', '/v3/templates', { name: 'tpl-from-base' });
    expect(reg.status).toBe(202);
    const { templateID, buildID } = reg.json as { templateID: string; buildID: string };
    const trigger = await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, {
      fromTemplate: 'base',
      steps: [{ type: 'RUN', args: ['python3 -c "print(6*7)" > /home/user/answer.txt'], force: false }],
    });
    expect(trigger.status).toBe(202);
    const status = await eventually(
      async () => {
        const now = (await api('GET', `/templates/${templateID}/builds/${buildID}/status`)).json
          .status as string;
        if (!['ready', 'error'].includes(now)) throw new Error(`the build is still ${now}`);
        return now;
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    );
    expect(status).toBe('ready');
    const sbx = await Sandbox.create('tpl-from-base');
    try {
      expect((await sbx.commands.run('cat /home/user/answer.txt; whoami')).stdout).toBe('42\nuser\n');
    } finally {
      await sbx.kill();
      await api('DELETE', '/templates/tpl-from-base');
    }
  });

  it('answers unknown templates and builds with 404', async () => {
    expect((await api('GET', '/templates/aliases/no-such-template')).status).toBe(404);
    expect((await api('GET', '/templates/nope/builds/nope/status')).status).toBe(404);
    const create = await api('POST', '/sandboxes', { templateID: 'no-such-template' });
    expect(create.json.message).toContain('no-such-template');
  });
});

describe('POST /sandboxes-cold', () => {
  it('starts a sandbox straight from an image, with its env and workdir', async () => {
    const r = await api('POST', '/sandboxes-cold', { image: image('app'), cpuCount: 1, memoryMB: 512 });
    expect(r.status).toBe(201);
    const sbx = await Sandbox.connect(r.json.sandboxID as string);
    try {
      expect((await sbx.commands.run('echo $GREETING; pwd; cat app.txt')).stdout).toBe('hi\n/srv\napp\n');
      // A fork is restored from the sandbox's own state: same default user and environment.
      const who = (await sbx.commands.run('whoami')).stdout;
      const fork = await api('POST', `/sandboxes/${sbx.sandboxId}/fork`, { count: 1 });
      expect(fork.status).toBe(201);
      const child = await Sandbox.connect(
        (fork.json as { sandbox: { sandboxID: string } }[])[0]!.sandbox.sandboxID,
      );
      try {
        expect((await child.commands.run('whoami; echo $GREETING')).stdout).toBe(`${who}hi\n`);
      } finally {
        await child.kill();
      }
    } finally {
      await sbx.kill();
    }
  });

  it('names an unknown image tag', async () => {
    const r = await api('POST', '/sandboxes-cold', { image: `${reg.host}/test/app:missing` });
    expect(r.status).toBe(404);
    expect(r.json.message).toContain('missing');
  });
});

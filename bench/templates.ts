/**
 * Template benchmark (issue #6): sandbox create latency straight from an image
 * (POST /sandboxes-cold) vs from a template built from the same image (E2B SDK Template.build, then
 * POST /sandboxes {templateID}), through a real aenv-server with the warm pool off, in one run.
 * The first cold create finds the image not pulled yet and is reported on its own (the first on a
 * fresh node also makes the node's envd tools layer, once per home; a second image with its own
 * data layer, created from next, shows the pull without that); the later cold creates find the
 * image's layers cached. Latency = the REST call, which returns once envd in the sandbox
 * has answered (/init); an `echo` through the SDK then confirms each sandbox, untimed.
 *
 * The images (busybox with a /bin/bash shim, as the e2e tests use, plus a data layer of --image-mb
 * in --files files, different in each) is pushed to Debian's docker-registry on 127.0.0.1. The node shares nothing
 * with the tests or other benches: port 18108, home /var/lib/aenv-bench-tpl, network tag `bt` in
 * 10.160.0.0/16, runtime dir /run/aenv-bench-tpl. Everything is removed at the end, also on
 * failure or Ctrl-C.
 *
 * Run as root: npx tsx bench/templates.ts [--iter 10] [--image-mb 100] [--files 4000]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Sandbox, Template, type LogEntry } from 'e2b';
import { api, startServer, useSdkEnv, type TestServer } from '@agentenv/test-support/server';
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
import { files } from './layers.js';
import { cleanupOnSignals, leftBehind } from './leftovers.js';
import { fmt, line, percentile, timeMs } from './stats.js';
import { benchNode, borrowBaseRootfs, runBench, stopBenchServer } from './bench-node.js';

const { values } = parseArgs({
  options: {
    iter: { type: 'string', default: '10' },
    'image-mb': { type: 'string', default: '100' },
    files: { type: 'string', default: '4000' },
  },
});
const ITER = Number(values.iter);
const IMAGE_MB = Number(values['image-mb']);
const FILES = Number(values.files);

const {
  url: URL_BASE,
  home: HOME,
  runtime: RUNTIME,
  tag: TAG,
  env: SERVER_ENV,
} = benchNode({ port: 18108, name: 'tpl', tag: 'bt', hostRange: '10.160.0.0/16' });
/** The same resources on both paths: /sandboxes-cold's defaults, given to the build too. */
const RES = { cpuCount: 2, memoryMB: 1024 };
const TEMPLATE = 'bench-tpl';
const MB = 2 ** 20;

// ------------------------------------------------------------------ setup and cleanup

let server: TestServer | undefined;
let reg: TestRegistry | undefined;
let work: string | undefined;
const live = new Set<string>();

let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  if (server) await stopBenchServer(server).catch((e: unknown) => console.error('stopping the node:', e));
  await reg?.stop().catch((e: unknown) => console.error('stopping the registry:', e));
  if (work) await rm(work, { recursive: true, force: true });
  for (const d of [HOME, RUNTIME]) await rm(d, { recursive: true, force: true });
  const left = leftBehind([`aenv-${TAG}-`], [HOME, RUNTIME]);
  if (left.length) console.error(`left behind:\n${left.join('\n')}`);
}
cleanupOnSignals(cleanup);

// ------------------------------------------------------------------ measurements

/** Kills a sandbox after one `echo` through the SDK has confirmed that envd runs its commands. */
async function confirmAndKill(id: string): Promise<void> {
  const sbx = await Sandbox.connect(id);
  const out = (await sbx.commands.run('echo ok')).stdout;
  if (out !== 'ok\n') throw new Error(`${id}: echo gave ${JSON.stringify(out)}`);
  await sbx.kill();
  live.delete(id);
}

/** One timed create through REST: POST `path` until it answers 201 (envd has answered /init). */
async function create(path: string, body: unknown): Promise<number> {
  let id = '';
  const ms = await timeMs(async () => {
    const r = await api('POST', path, body);
    if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.json)}`);
    id = r.json.sandboxID as string;
  });
  live.add(id);
  await confirmAndKill(id);
  return ms;
}

interface Result {
  imageBytes: { compressed: number; layers: number };
  firstCold: number;
  firstColdB: number;
  pulled: string;
  build: number;
  cold: number[];
  template: number[];
}

async function main(): Promise<Result> {
  await rm(HOME, { recursive: true, force: true }); // a previous run killed hard
  work = await mkdtemp(join(tmpdir(), 'aenv-bench-tpl-'));
  reg = await startRegistry();
  process.stdout.write(`building two images: ${IMAGE_MB} MiB of data in ${FILES} files each… `);
  const shared = [await baseLayer(), await shellLayer()];
  const make = async () =>
    ociImage([...shared, await tarOf(files('usr/share/bench', FILES, IMAGE_MB * MB))], {
      env: ['PATH=/bin:/usr/bin'],
    });
  const [img, imgB] = [await make(), await make()];
  await writeLayout(join(work, 'layout'), [
    { tag: 'a', top: img.manifest, blobs: imageBlobs(img) },
    { tag: 'b', top: imgB.manifest, blobs: imageBlobs(imgB) },
  ]);
  const image = `${reg.host}/bench/tpl-a:1`;
  const imageB = `${reg.host}/bench/tpl-b:1`;
  await skopeoPush(join(work, 'layout'), 'a', image);
  await skopeoPush(join(work, 'layout'), 'b', imageB);
  const compressed = img.layers.reduce((s, l) => s + l.size, 0);
  console.log(`pushed (${(compressed / MB).toFixed(1)} MiB compressed, ${img.layers.length} layers)`);

  // The node builds `base` at start: borrowed, so no mmdebstrap runs beside the measurements.
  await borrowBaseRootfs(HOME);
  server = await startServer(SERVER_ENV);
  useSdkEnv(URL_BASE);
  const cold = { image, ...RES };

  // 1. The first cold create: the node has never seen the image (pull + unpack + boot).
  const firstCold = await create('/sandboxes-cold', cold);
  // …and of a second image on the same node: only its data layer is new.
  const firstColdB = await create('/sandboxes-cold', { ...cold, image: imageB });

  // 2. The template: the same image, built with the SDK (a pull that finds every layer cached,
  //    a boot, and the capture of the ready state).
  const logs: string[] = [];
  const build = await timeMs(() =>
    Template.build(Template().fromImage(image), TEMPLATE, {
      ...RES,
      onBuildLogs: (e: LogEntry) => logs.push(e.message),
    }),
  );
  const pulled = /\d+ of \d+ bytes downloaded/.exec(logs.join('\n'))?.[0] ?? '?';

  // 3. Cold creates (image pulled) and template creates, alternating so both see the same load.
  const r = { cold: [] as number[], template: [] as number[] };
  for (let i = 0; i < ITER; i++) {
    r.cold.push(await create('/sandboxes-cold', cold));
    r.template.push(await create('/sandboxes', { templateID: TEMPLATE }));
  }
  return {
    imageBytes: { compressed, layers: img.layers.length },
    firstCold,
    firstColdB,
    pulled,
    build,
    ...r,
  };
}

function report(r: Result): void {
  console.log(
    `\nAgentENV template benchmark (${new Date().toISOString()}, pool off, ${ITER} creates per case, ` +
      `image ${(r.imageBytes.compressed / MB).toFixed(1)} MiB compressed in ${r.imageBytes.layers} layers)\n`,
  );
  const once = (name: string, ms: number) => console.log(`${name.padEnd(44)} ${fmt(ms)}`);
  once('cold create, fresh node, image not pulled', r.firstCold);
  once('cold create, 2nd image not pulled', r.firstColdB);
  line('cold create, image pulled', r.cold);
  line('create from the built template', r.template);
  line('cold (pulled) vs template', r.cold, r.template);
  const t50 = percentile(r.template, 50);
  const c50 = percentile(r.cold, 50);
  console.log(
    `  vs template p50: fresh node ${(r.firstCold / t50).toFixed(2)}x, 2nd image ${(r.firstColdB / t50).toFixed(2)}x; ` +
      `minus cold p50 (≈ the pull, + the tools layer on the fresh node): ${fmt(r.firstCold - c50)}, ${fmt(r.firstColdB - c50)}`,
  );
  console.log(`Template.build of the image (no steps): ${fmt(r.build)}; its pull: ${r.pulled}`);
}

await runBench(async () => report(await main()), {
  server: () => server,
  cleanup,
  explain: () => {
    if (live.size) console.error(`sandboxes still running: ${[...live].join(', ')}`);
  },
});

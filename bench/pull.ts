/**
 * OCI pull benchmark: two images that share a base layer, pushed to a local docker-registry and
 * pulled into an empty node home. Prints pull times, bytes downloaded and disk use; the second
 * image must reuse the base. Floors measured in the same run: `skopeo copy` of the same image to a
 * directory (transfer + digest checks only) and GNU `tar -xzf` of the base layer (unpack only).
 * Run as root: npx tsx bench/pull.ts [--base-mb 150] [--files 6000] [--app-mb 10]
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { ImageStore, diskUsage } from '@agentenv/oci';
import {
  baseLayer,
  imageBlobs,
  ociImage,
  skopeoPush,
  tarOf,
  writeLayout,
  startRegistry,
} from '@agentenv/test-support/oci';
import { files } from './layers.js';
import { timeMs } from './stats.js';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    'base-mb': { type: 'string', default: '150' },
    files: { type: 'string', default: '6000' },
    'app-mb': { type: 'string', default: '10' },
  },
});
const BASE_MB = Number(values['base-mb']);
const FILES = Number(values.files);
const APP_MB = Number(values['app-mb']);
const MB = 1 << 20;
const mb = (n: number) => `${(n / MB).toFixed(1)} MB`;

async function main() {
  const work = await mkdtemp(join(tmpdir(), 'aenv-bench-pull-'));
  const reg = await startRegistry();
  try {
    process.stdout.write(
      `building images: base ${BASE_MB} MB in ${FILES} files, app layers ${APP_MB} MB each… `,
    );
    const base = Buffer.concat([await tarOf(files('usr/share/base', FILES, BASE_MB * MB))]);
    const bb = await baseLayer();
    const a = ociImage([bb, base, await tarOf(files('app', 20, APP_MB * MB))]);
    const b = ociImage([bb, base, await tarOf(files('app', 20, APP_MB * MB))]);
    const layout = join(work, 'layout');
    await writeLayout(layout, [
      { tag: 'a', top: a.manifest, blobs: imageBlobs(a) },
      { tag: 'b', top: b.manifest, blobs: imageBlobs(b) },
    ]);
    await skopeoPush(layout, 'a', `${reg.host}/bench/a:1`);
    await skopeoPush(layout, 'b', `${reg.host}/bench/b:1`);
    const compressed = (img: typeof a) => img.layers.reduce((s, l) => s + l.size, 0);
    console.log(`done (image a: ${mb(compressed(a))} compressed, ${a.layers.length} layers)`);

    // floors
    const floorDir = join(work, 'floor');
    const skopeoMs = await timeMs(() =>
      run('skopeo', [
        '--insecure-policy',
        'copy',
        '--quiet',
        '--src-tls-verify=false',
        `docker://${reg.host}/bench/a:1`,
        `dir:${floorDir}`,
      ]),
    );
    const gz = join(work, 'base.tar.gz');
    await writeFile(gz, a.layers[1]!.data);
    await mkdir(join(work, 'untar'));
    const tarMs = await timeMs(() => run('tar', ['-xzf', gz, '-C', join(work, 'untar')]));

    const home = join(work, 'home');
    const store = new ImageStore({ home });
    let pulledA = await store.pull(`${reg.host}/bench/a:1`);
    const coldMs = await (async () => {
      await rm(home, { recursive: true, force: true });
      const s = new ImageStore({ home });
      return timeMs(async () => (pulledA = await s.pull(`${reg.host}/bench/a:1`)));
    })();
    const diskA = await diskUsage(join(home, 'layers'));
    const s2 = new ImageStore({ home });
    let pulledB = pulledA;
    const secondMs = await timeMs(async () => (pulledB = await s2.pull(`${reg.host}/bench/b:1`)));
    const diskAB = await diskUsage(join(home, 'layers'));
    const warmMs = await timeMs(() => new ImageStore({ home }).pull(`${reg.host}/bench/a:1`));
    const shared = pulledA.layerIds.filter((id) => pulledB.layerIds.includes(id)).length;

    console.log('\nOCI pull (docker-registry on 127.0.0.1, fresh node home)');
    console.table([
      {
        case: 'pull a (cold)',
        time: `${coldMs.toFixed(0)} ms`,
        downloaded: mb(pulledA.downloadedBytes),
        'MB/s (compressed)': (pulledA.downloadedBytes / MB / (coldMs / 1000)).toFixed(1),
      },
      {
        case: 'pull b (shares base)',
        time: `${secondMs.toFixed(0)} ms`,
        downloaded: mb(pulledB.downloadedBytes),
        'MB/s (compressed)': '',
      },
      {
        case: 'pull a again (cached)',
        time: `${warmMs.toFixed(0)} ms`,
        downloaded: mb(0),
        'MB/s (compressed)': '',
      },
      {
        case: 'floor: skopeo copy a → dir:',
        time: `${skopeoMs.toFixed(0)} ms`,
        downloaded: mb(compressed(a)),
        'MB/s (compressed)': (compressed(a) / MB / (skopeoMs / 1000)).toFixed(1),
      },
      {
        case: 'floor: tar -xzf base layer',
        time: `${tarMs.toFixed(0)} ms`,
        downloaded: '',
        'MB/s (compressed)': (a.layers[1]!.size / MB / (tarMs / 1000)).toFixed(1),
      },
    ]);
    console.table([
      { what: 'layers/ after pulling a', disk: mb(diskA) },
      { what: 'layers/ after pulling a and b', disk: mb(diskAB) },
      { what: 'added by b', disk: mb(diskAB - diskA) },
      { what: `layers shared by a and b`, disk: `${shared} of ${pulledB.layerIds.length}` },
      { what: 'cache accounting (estimate)', disk: mb(s2.cache.usage().usedBytes) },
    ]);
  } finally {
    await reg.stop();
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

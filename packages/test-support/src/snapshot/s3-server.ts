/**
 * s3rver (a real S3 server implementation) as a standalone process for the snapshot tests; see
 * startS3 in helpers.ts. Prints `PORT <n>` once listening; SIGTERM stops it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rename, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import S3rver from 's3rver';

interface S3rverStore {
  getResourcePath(bucket: string, key: string | undefined, resource: string): string;
  putMetadata(bucket: string, key: string, metadata: unknown, md5: string): Promise<void>;
  putObject(object: {
    bucket: string;
    key: string;
    content: Buffer | Readable;
    metadata: unknown;
  }): Promise<unknown>;
  deleteObject(bucket: string, key: string): Promise<void>;
  listObjects(bucket: string, options: unknown): Promise<unknown>;
}

/**
 * Fixes three concurrency bugs of s3rver 3.7.1's filesystem store, which real S3 does not have
 * and which concurrent writers hit: a PUT truncates and rewrites the object file in place (and
 * answers before the write is done), so a concurrent GET can read a partial object; a DELETE
 * removes directories that became empty, so a concurrent PUT into the same "folder" fails to open
 * its file and crashes the server with an unhandled stream error; a LIST stats every file it
 * found and answers 500 when one was deleted meanwhile. PUTs here are written to a temporary key
 * and renamed into place, DELETEs leave directories alone, and a LIST that met a vanished file
 * is done again.
 */
function makeAtomic(store: S3rverStore): void {
  const putMetadata = store.putMetadata.bind(store);
  store.putObject = async (object) => {
    const content = Buffer.isBuffer(object.content)
      ? object.content
      : Buffer.concat(await (object.content as Readable).toArray());
    const md5 = createHash('md5').update(content).digest('hex');
    const tmpKey = `__tmp/${randomBytes(8).toString('hex')}`;
    const temp = (r: string) => store.getResourcePath(object.bucket, tmpKey, r);
    const target = (r: string) => store.getResourcePath(object.bucket, object.key, r);
    await mkdir(dirname(temp('object')), { recursive: true });
    await writeFile(temp('object'), content);
    await putMetadata(object.bucket, tmpKey, object.metadata, md5);
    await mkdir(dirname(target('object')), { recursive: true });
    await rename(temp('metadata.json'), target('metadata.json'));
    await rename(temp('object.md5'), target('object.md5'));
    await rename(temp('object'), target('object'));
    return { size: content.length, md5 };
  };
  const listObjects = store.listObjects.bind(store);
  store.listObjects = async (bucket, options) => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await listObjects(bucket, options);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 20) throw e;
      }
    }
  };
  store.deleteObject = async (bucket, key) => {
    for (const r of ['object', 'object.md5', 'metadata.json']) {
      await unlink(store.getResourcePath(bucket, key, r)).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT') throw e;
      });
    }
  };
}

interface KoaLike {
  middleware: ((
    ctx: { method: string; path: string; body: unknown },
    next: () => Promise<void>,
  ) => Promise<void>)[];
}

/**
 * Counts requests by method and kind (`blob` for keys under blobs/, else `other`), answered at
 * GET /__requests, so tests can tell how many chunk objects a node read.
 */
function countRequests(app: KoaLike): void {
  const counts: Record<string, number> = {};
  app.middleware.unshift(async (ctx, next) => {
    if (ctx.path === '/__requests') {
      ctx.body = counts;
      return;
    }
    const key = `${ctx.method} ${ctx.path.includes('/blobs/sha256/') ? 'blob' : 'other'}`;
    counts[key] = (counts[key] ?? 0) + 1;
    await next();
  });
}

const args = JSON.parse(process.argv[2] ?? '{}') as { dir: string; bucket: string; log?: boolean };
const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: !args.log,
  directory: args.dir,
  configureBuckets: [{ name: args.bucket, configs: [] }],
});
makeAtomic((server as unknown as { store: S3rverStore }).store);
countRequests(server as unknown as KoaLike);
const info = (await server.run()) as { port: number };
console.log(`PORT ${info.port}`);
process.on('SIGTERM', () => {
  void server.close().finally(() => process.exit(0));
});

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { VolumeFiles } from './content.js';
import type { VolumeInfo, VolumeStore } from './store.js';

export interface VolumeRoutesOptions {
  store: VolumeStore;
  quotaBytes: number;
}

/** Where the content API lives; E2B_VOLUME_API_URL is the node's URL, and this prefix follows. */
export const VOLUME_CONTENT_PREFIX = '/volumecontent/';

const VolumeParams = Type.Object({ volumeID: Type.String({ minLength: 1, maxLength: 64 }) });
const NewVolume = Type.Object({ name: Type.String({ maxLength: 256 }) }, { additionalProperties: true });
const Uint32 = Type.Integer({ minimum: 0, maximum: 0xffffffff });
const PathQuery = Type.Object({ path: Type.String({ minLength: 1, maxLength: 4096 }) });
const ListQuery = Type.Object({
  path: Type.String({ minLength: 1, maxLength: 4096 }),
  depth: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
});
const WriteQuery = Type.Object({
  path: Type.String({ minLength: 1, maxLength: 4096 }),
  uid: Type.Optional(Uint32),
  gid: Type.Optional(Uint32),
  mode: Type.Optional(Uint32),
  force: Type.Optional(Type.Boolean()),
});
const MetadataBody = Type.Object(
  { uid: Type.Optional(Uint32), gid: Type.Optional(Uint32), mode: Type.Optional(Uint32) },
  { additionalProperties: false },
);

const volumeAndToken = (v: VolumeInfo) => ({ volumeID: v.volumeID, name: v.name, token: v.token });

/**
 * E2B's volume management API (API key, like every control call). The volumes' images are
 * mounted while the API serves and unmounted when it closes (node stop).
 */
export const volumeRoutes: FastifyPluginAsyncTypebox<VolumeRoutesOptions> = async (
  app,
  { store, quotaBytes },
) => {
  await store.attachAll();
  app.addHook('onClose', () => store.detachAll());
  app.post('/volumes', { schema: { body: NewVolume } }, async (req, reply) =>
    reply.status(201).send(volumeAndToken(await store.create(req.body.name, quotaBytes))),
  );
  app.get('/volumes', async () => store.list().map((v) => ({ volumeID: v.volumeID, name: v.name })));
  app.get('/volumes/:volumeID', { schema: { params: VolumeParams } }, async (req) =>
    volumeAndToken(store.get(req.params.volumeID)),
  );
  app.delete('/volumes/:volumeID', { schema: { params: VolumeParams } }, async (req, reply) => {
    if (!(await store.destroy(req.params.volumeID))) store.get(req.params.volumeID);
    return reply.status(204).send();
  });
};

/**
 * E2B's volume content API: a volume's files, authorised by the volume's own bearer token (not
 * the API key), served whether or not any sandbox mounts the volume.
 */
export const volumeContentRoutes: FastifyPluginAsyncTypebox<VolumeRoutesOptions> = async (app, opts) => {
  const files = async (req: Pick<FastifyRequest, 'headers'> & { params: { volumeID: string } }) => {
    const v = opts.store.authorize(req.params.volumeID, req.headers.authorization);
    return new VolumeFiles(await opts.store.attach(v), v.name, opts.quotaBytes);
  };
  // Uploads stream to disk untouched; the quota, not the control API's body limit, bounds them.
  app.addContentTypeParser('*', { bodyLimit: Number.MAX_SAFE_INTEGER }, (_req, payload, done) =>
    done(null, payload),
  );
  const base = `${VOLUME_CONTENT_PREFIX}:volumeID`;

  app.get(`${base}/path`, { schema: { params: VolumeParams, querystring: PathQuery } }, async (req) =>
    (await files(req)).stat(req.query.path),
  );
  app.patch(
    `${base}/path`,
    { schema: { params: VolumeParams, querystring: PathQuery, body: MetadataBody } },
    async (req) => (await files(req)).updateMetadata(req.query.path, req.body),
  );
  app.delete(
    `${base}/path`,
    { schema: { params: VolumeParams, querystring: PathQuery } },
    async (req, reply) => {
      await (await files(req)).remove(req.query.path);
      return reply.status(204).send();
    },
  );
  app.get(`${base}/dir`, { schema: { params: VolumeParams, querystring: ListQuery } }, async (req) =>
    (await files(req)).list(req.query.path, req.query.depth ?? 1),
  );
  app.post(`${base}/dir`, { schema: { params: VolumeParams, querystring: WriteQuery } }, async (req, reply) =>
    reply.status(201).send(await (await files(req)).makeDir(req.query.path, req.query)),
  );
  app.get(
    `${base}/file`,
    { schema: { params: VolumeParams, querystring: PathQuery } },
    async (req, reply) => {
      const { stream, size } = await (await files(req)).read(req.query.path);
      return reply
        .header('content-type', 'application/octet-stream')
        .header('content-length', size)
        .send(stream);
    },
  );
  app.put(
    `${base}/file`,
    { schema: { params: VolumeParams, querystring: WriteQuery } },
    async (req, reply) => {
      const f = await files(req);
      const declared = Number(req.headers['content-length']);
      const body = (req.body as Readable | undefined) ?? Readable.from([]);
      const stat = await f.write(req.query.path, body, {
        ...req.query,
        ...(Number.isFinite(declared) ? { declaredBytes: declared } : {}),
      });
      return reply.status(201).send(stat);
    },
  );
};

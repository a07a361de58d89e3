import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { DEFAULT_TEMPLATE, invalid, notFound } from '@agentenv/common';
import type { SnapshotCatalog } from '../../orchestrator/index.js';
import { checkFilesHash, type BuildFiles, type BuiltTemplates } from '../../templates/index.js';
import { refuseUnsupportedBuild } from '../unsupported.js';

export interface TemplateRoutesOptions {
  templates: BuiltTemplates;
  files: BuildFiles;
  snapshots: SnapshotCatalog;
}

const Id = Type.String({ minLength: 1, maxLength: 256 });
const TemplateParams = Type.Object({ templateID: Id });
const BuildParams = Type.Object({ templateID: Id, buildID: Type.String({ maxLength: 64 }) });
const FilesParams = Type.Object({ templateID: Id, hash: Type.String({ maxLength: 64 }) });
const Name = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^[a-zA-Z0-9][a-zA-Z0-9._/-]*(:[a-zA-Z0-9._-]+)?$',
});
const Tag = Type.String({ pattern: '^[a-zA-Z0-9._-]{1,64}$' });

const RequestBuildBody = Type.Object(
  {
    name: Type.Optional(Name),
    alias: Type.Optional(Name),
    tags: Type.Optional(Type.Array(Tag, { maxItems: 20 })),
    cpuCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
    memoryMB: Type.Optional(Type.Integer({ minimum: 128, maximum: 262_144 })),
  },
  { additionalProperties: true },
);

const Step = Type.Object(
  {
    type: Type.Union(['RUN', 'ENV', 'ARG', 'WORKDIR', 'USER', 'COPY'].map((t) => Type.Literal(t))),
    args: Type.Array(Type.String({ maxLength: 65_536 }), { maxItems: 256 }),
    filesHash: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
  },
  { additionalProperties: true },
);

const BuildBody = Type.Object(
  {
    fromImage: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    fromTemplate: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    fromImageRegistry: Type.Optional(
      Type.Object(
        {
          type: Type.String(),
          username: Type.Optional(Type.String()),
          password: Type.Optional(Type.String()),
        },
        { additionalProperties: true },
      ),
    ),
    startCmd: Type.Optional(Type.String({ maxLength: 65_536 })),
    readyCmd: Type.Optional(Type.String({ maxLength: 65_536 })),
    steps: Type.Optional(Type.Array(Step, { maxItems: 1000 })),
  },
  { additionalProperties: true },
);

/**
 * E2B's template build API (E2B-COMPAT.md §2: request a build, upload COPY files, trigger, poll
 * the status) and the template catalogue.
 */
// eslint-disable-next-line max-lines-per-function -- declarative: one route after another
export const templateRoutes: FastifyPluginAsyncTypebox<TemplateRoutesOptions> = async (app, opts) => {
  const { templates, files } = opts;

  for (const url of ['/v3/templates', '/v2/templates', '/templates']) {
    app.post(url, { schema: { body: RequestBuildBody } }, async (req, reply) => {
      const name = req.body.name ?? req.body.alias;
      if (!name) throw invalid('name is required');
      const r = await templates.register({
        name,
        ...(req.body.tags ? { tags: req.body.tags } : {}),
        ...(req.body.cpuCount ? { cpuCount: req.body.cpuCount } : {}),
        ...(req.body.memoryMB ? { memoryMB: req.body.memoryMB } : {}),
      });
      return reply.status(202).send({ ...r, public: false });
    });
  }

  app.get('/templates/:templateID/files/:hash', { schema: { params: FilesParams } }, async (req, reply) => {
    const hash = checkFilesHash(req.params.hash);
    if (await files.has(hash)) return reply.status(201).send({ present: true });
    const origin = `${req.protocol}://${req.headers.host ?? req.host}`;
    const apiKey = req.headers['x-api-key'];
    return reply.status(201).send({
      present: false,
      url: `${origin}/templates/${encodeURIComponent(req.params.templateID)}/files/${hash}`,
      // The upload goes to this node, with the key this request authenticated with.
      ...(typeof apiKey === 'string' ? { headers: { 'x-api-key': apiKey } } : {}),
    });
  });

  // The archive is streamed to disk as it comes: no body parsing for this route.
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    raw.put('/templates/:templateID/files/:hash', { schema: { params: FilesParams } }, async (req, reply) => {
      await files.put(checkFilesHash((req.params as { hash: string }).hash), req.raw);
      return reply.status(201).send();
    });
  });

  app.post(
    '/v2/templates/:templateID/builds/:buildID',
    { schema: { params: BuildParams, body: BuildBody } },
    async (req, reply) => {
      refuseUnsupportedBuild(req.body);
      templates.trigger(req.params.templateID, req.params.buildID, {
        ...req.body,
        steps: req.body.steps ?? [],
      });
      return reply.status(202).send();
    },
  );

  app.get(
    '/templates/:templateID/builds/:buildID/status',
    {
      schema: {
        params: BuildParams,
        querystring: Type.Object({ logsOffset: Type.Optional(Type.Integer({ minimum: 0 })) }),
      },
    },
    async (req) => templates.status(req.params.templateID, req.params.buildID, req.query.logsOffset ?? 0),
  );

  for (const url of ['/templates', '/v2/templates']) app.get(url, async () => templates.list());

  // E2B's TemplateAliasResponse, for any name a create takes: a built template, a snapshot, or
  // `base` (public, as E2B's own templates are to a team).
  app.get('/templates/aliases/:alias', { schema: { params: Type.Object({ alias: Id }) } }, async (req) => {
    const { alias } = req.params;
    const t = await templates.get(alias);
    if (t) return { templateID: t.templateID, public: false };
    const [snapshot] = await opts.snapshots.list({ name: alias });
    if (snapshot) return { templateID: snapshot.snapshotID, public: false };
    if (alias === DEFAULT_TEMPLATE) return { templateID: DEFAULT_TEMPLATE, public: true };
    throw notFound(`template alias ${alias} not found`);
  });

  app.get('/templates/:templateID', { schema: { params: TemplateParams } }, async (req) => {
    const t = await templates.get(req.params.templateID);
    if (!t) throw notFound(`template ${req.params.templateID} not found`);
    return t;
  });

  const Tags = Type.Array(Tag, { minItems: 1, maxItems: 20 });
  app.post(
    '/templates/tags',
    { schema: { body: Type.Object({ target: Name, tags: Tags }) } },
    async (req, reply) => reply.status(201).send(await templates.assignTags(req.body.target, req.body.tags)),
  );
  app.delete(
    '/templates/tags',
    { schema: { body: Type.Object({ name: Name, tags: Tags }) } },
    async (req, reply) => {
      await templates.removeTags(req.body.name, req.body.tags);
      return reply.status(204).send();
    },
  );
  app.get('/templates/:templateID/tags', { schema: { params: TemplateParams } }, async (req) =>
    templates.tags(req.params.templateID),
  );

  // One catalogue: a built template, else the snapshot of that id or name.
  app.delete('/templates/:templateID', { schema: { params: TemplateParams } }, async (req, reply) => {
    const id = req.params.templateID;
    if (!(await templates.delete(id)) && !(await opts.snapshots.delete(id)))
      throw notFound(`template ${id} not found`);
    return reply.status(204).send();
  });
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { notFound } from '@agentenv/common';
import type { Orchestrator, SnapshotCatalog, SnapshotInfo } from '../../orchestrator/index.js';
import { createBodyOf } from '../create-body.js';
import { errorBody } from '../errors.js';
import { paginate } from '../pagination.js';
import { WaitQuery, SandboxParams } from '../schemas.js';
import { sandboxBody } from '../serialize.js';

export interface SnapshotRoutesOptions {
  orchestrator: Orchestrator;
  snapshots: SnapshotCatalog;
  domain: string | undefined;
}

const snapshotBody = (i: SnapshotInfo) => ({
  snapshotID: i.snapshotID,
  names: i.names,
  sandboxID: i.sourceSandboxId,
  templateID: i.templateId,
  cpuCount: i.cpuCount,
  memoryMB: i.memoryMB,
  diskSizeMB: i.diskSizeMB,
  createdAt: i.createdAt,
  updatedAt: i.updatedAt,
  stored: i.stored,
});

const Name = Type.String({ minLength: 1, maxLength: 128, pattern: '^[a-zA-Z0-9][a-zA-Z0-9._:/-]*$' });

/** Snapshots and fork (AGENTENV-API.md §1): capture running sandboxes, start many from one state. */
export const snapshotRoutes: FastifyPluginAsyncTypebox<SnapshotRoutesOptions> = async (app, opts) => {
  const { orchestrator: orch, snapshots } = opts;

  app.post(
    '/sandboxes/:sandboxID/snapshots',
    {
      schema: {
        params: SandboxParams,
        querystring: WaitQuery,
        body: Type.Optional(Type.Object({ name: Type.Optional(Name) })),
      },
    },
    async (req, reply) => {
      const info = await orch.snapshot(req.params.sandboxID, req.body?.name, req.query.wait === 'stored');
      return reply.status(201).send(snapshotBody(info));
    },
  );

  app.get(
    '/snapshots',
    {
      schema: {
        querystring: Type.Object({
          sandboxID: Type.Optional(Type.String({ maxLength: 64 })),
          name: Type.Optional(Type.String({ maxLength: 128 })),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
          nextToken: Type.Optional(Type.String({ maxLength: 256 })),
        }),
      },
    },
    async (req, reply) => {
      const all = await snapshots.list({
        ...(req.query.sandboxID ? { sandboxId: req.query.sandboxID } : {}),
        ...(req.query.name ? { name: req.query.name } : {}),
      });
      const { page, next } = paginate(all.map(snapshotBody), req.query.limit ?? 100, req.query.nextToken);
      if (next) void reply.header('x-next-token', next);
      return page;
    },
  );

  app.get(
    '/snapshots/:idOrName',
    { schema: { params: Type.Object({ idOrName: Type.String({ maxLength: 128 }) }) } },
    async (req) => {
      const info = await snapshots.info(req.params.idOrName);
      if (!info) throw notFound(`snapshot ${req.params.idOrName} not found`);
      return snapshotBody(info);
    },
  );

  // The create body of a child of this sandbox started on another node (the gateway spills a
  // fork's children there from a snapshot): the settings a child on this node gets.
  app.get('/sandboxes/:sandboxID/fork', { schema: { params: SandboxParams } }, async (req) =>
    createBodyOf(orch.forkSettings(req.params.sandboxID)),
  );

  app.post(
    '/sandboxes/:sandboxID/fork',
    {
      schema: {
        params: SandboxParams,
        body: Type.Object({
          count: Type.Optional(Type.Integer()),
          timeout: Type.Optional(Type.Integer({ minimum: 1, maximum: 2_592_000 })),
        }),
      },
    },
    async (req, reply) => {
      const results = await orch.fork(req.params.sandboxID, req.body.count ?? 1, req.body.timeout);
      return reply
        .status(201)
        .send(
          results.map((r) =>
            'sandbox' in r
              ? { sandbox: sandboxBody(r.sandbox, opts.domain) }
              : { error: errorBody(r.error).body },
          ),
        );
    },
  );
};

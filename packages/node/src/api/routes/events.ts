import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { SandboxEventLog } from '../../cluster/index.js';
import { notFound } from '@agentenv/common';
import { SandboxParams } from '../schemas.js';

export interface EventRoutesOptions {
  events: SandboxEventLog;
}

const EventBody = Type.Object({
  type: Type.Union([
    Type.Literal('created'),
    Type.Literal('paused'),
    Type.Literal('resumed'),
    Type.Literal('killed'),
    Type.Literal('exited'),
    Type.Literal('forked'),
    Type.Literal('snapshot'),
    Type.Literal('lost'),
  ]),
  sandboxID: Type.String(),
  nodeID: Type.String(),
  reason: Type.String(),
  details: Type.Record(Type.String(), Type.String()),
  timestamp: Type.String({ format: 'date-time' }),
});

/**
 * `GET /sandboxes/{id}/events`: the sandbox's lifecycle events on this node, oldest first (also
 * after it was killed, while the node keeps them). Events of a sandbox whose node failed are the
 * cluster scheduler's (ListSandboxEvents), which the gateway serves.
 */
export const eventRoutes: FastifyPluginAsyncTypebox<EventRoutesOptions> = async (app, opts) => {
  app.get(
    '/sandboxes/:sandboxID/events',
    { schema: { params: SandboxParams, response: { 200: Type.Array(EventBody) } } },
    async (req) => {
      const list = opts.events.list(req.params.sandboxID);
      if (!list) throw notFound(`sandbox ${req.params.sandboxID} has no events on this node`);
      return list;
    },
  );
};

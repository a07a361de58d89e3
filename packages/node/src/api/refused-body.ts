import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyTypeProvider } from 'fastify';

/** How much of a refused body the node still reads so that its sender gets to see the answer. */
const DISCARD_LIMIT = 16 << 20;

/**
 * Fastify answers a body over the limit with 413 and `Connection: close` while the client is
 * still writing it; the closed socket then resets the rest of the upload, and the client (fetch,
 * the SDKs) reports EPIPE instead of the 413. Like a web server's lingering close, the node reads
 * and drops the rest of a refused body, up to a bound past which it closes anyway.
 */
export function drainRefusedBodies<L extends FastifyBaseLogger, P extends FastifyTypeProvider>(
  app: FastifyInstance<Server, IncomingMessage, ServerResponse, L, P>,
  limit = DISCARD_LIMIT,
): void {
  app.addHook('onSend', async (request, reply, payload) => {
    const raw = request.raw;
    if (reply.statusCode !== 413 || raw.complete) return payload;
    reply.removeHeader('connection');
    let discarded = 0;
    raw.on('data', (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > limit) raw.socket.destroy();
    });
    raw.resume();
    return payload;
  });
}

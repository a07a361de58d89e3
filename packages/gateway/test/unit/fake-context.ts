import { pino } from 'pino';
import type { GatewayContext } from '../../src/context.js';
import type { Scheduler } from '../../src/scheduler/scheduler.js';
import type { NodeHttp } from '../../src/upstream/node-http.js';

/** A gateway context over a scheduler and nodes that implement only what a handler test needs. */
export function fakeContext(scheduler: Partial<Scheduler>, nodes: Partial<NodeHttp>): GatewayContext {
  return {
    scheduler: scheduler as Scheduler,
    nodes: nodes as NodeHttp,
    logger: pino({ level: 'silent' }),
    tls: false,
    controlTimeoutMs: 1000,
    startTimeoutMs: 1000,
  } as GatewayContext;
}

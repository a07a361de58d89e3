import type { StreamError } from '@agentenv/common';
import type { DrainCause } from '../orchestrator/index.js';

/** Why the node ends a sandbox's streams: an operation that drains its connections, or its own stop. */
export type StreamCut = DrainCause | 'stop';

/**
 * The error a stream cut for `why` ends with. A paused or killed sandbox is `unavailable`, as the
 * 502 of E2B's proxy for a sandbox that is gone reads to the SDKs; a capture leaves the processes
 * running, so their streams end `aborted` and a client may connect to them again.
 */
export function cutError(sandboxId: string, why: StreamCut | 'lost'): StreamError {
  switch (why) {
    case 'pause':
    case 'kill':
      return {
        code: 'unavailable',
        message: `sandbox ${sandboxId} was ${why === 'pause' ? 'paused' : 'killed'}`,
      };
    case 'snapshot':
    case 'fork':
      return {
        code: 'aborted',
        message: `sandbox ${sandboxId} was captured for a ${why}, which closes its connections; its processes run on`,
      };
    case 'stop':
      return { code: 'unavailable', message: 'the node is shutting down' };
    case 'lost':
      return { code: 'unavailable', message: `the connection to sandbox ${sandboxId} was lost` };
  }
}

import { create } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import {
  ConnectResponseSchema,
  type Process,
  type ProcessEvent,
  ProcessEventSchema,
  ProcessInfoSchema,
  type ProcessSelector,
  Signal,
  StartResponseSchema,
} from '@agentenv/protocol';
import { basicAuthUser } from '../auth.js';
import { invalidArgument, toConnectError } from '../errors.js';
import type { EnvdState } from '../state.js';
import { abortError, keepaliveIntervalMs, withKeepalive } from '../streams.js';
import type { ProcessOutput } from './events.js';
import type { ManagedProcess } from './managed-process.js';
import type { ProcessManager, Selector } from './manager.js';

function selectorOf(sel: ProcessSelector | undefined): Selector {
  switch (sel?.selector.case) {
    case 'pid':
      return { pid: sel.selector.value };
    case 'tag':
      return { tag: sel.selector.value };
    default:
      throw invalidArgument('process selector (pid or tag) is required');
  }
}

function toEvent(out: ProcessOutput): ProcessEvent {
  if (out.kind === 'data') {
    return create(ProcessEventSchema, {
      event: { case: 'data', value: { output: { case: out.stream, value: out.data } } },
    });
  }
  return create(ProcessEventSchema, { event: { case: 'end', value: out.end } });
}

const startEvent = (pid: number) => create(ProcessEventSchema, { event: { case: 'start', value: { pid } } });
const keepaliveEvent = () => create(ProcessEventSchema, { event: { case: 'keepalive', value: {} } });

/**
 * The event stream of one subscriber: start{pid}, output, end. A client that disconnects only
 * stops its own stream; the process keeps running. A stream whose deadline passes before the end
 * event ends with `deadline_exceeded` (see abortError).
 */
async function* follow(proc: ManagedProcess, ctx: HandlerContext): AsyncGenerator<ProcessEvent> {
  const sub = proc.subscribe();
  const onAbort = () => proc.unsubscribe(sub);
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    yield startEvent(proc.pid);
    const events = withKeepalive(sub, keepaliveIntervalMs(ctx.requestHeader), () => null, ctx.signal);
    for await (const out of events) {
      yield out ? toEvent(out) : keepaliveEvent();
      if (out?.kind === 'end') return;
    }
    const aborted = abortError(ctx.signal);
    if (aborted) throw aborted;
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
    proc.unsubscribe(sub);
  }
}

/** Runs a handler body, turning whatever it throws into a Connect error. */
async function guarded<T>(fn: () => Promise<T> | T): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toConnectError(err);
  }
}

export function processService(pm: ProcessManager, state: EnvdState): ServiceImpl<typeof Process> {
  return {
    list: () =>
      guarded(() => ({
        processes: pm
          .list()
          .map((p) => create(ProcessInfoSchema, { pid: p.pid, tag: p.tag, config: { ...p.config } })),
      })),

    async *start(req, ctx) {
      const proc = await guarded(() => {
        const user = state.userFor(basicAuthUser(ctx.requestHeader.get('authorization') ?? undefined));
        if (!req.process) throw invalidArgument('process is required');
        const size = req.pty?.size;
        return pm.start(
          {
            config: {
              cmd: req.process.cmd,
              args: req.process.args,
              envs: req.process.envs,
              ...(req.process.cwd !== undefined ? { cwd: req.process.cwd } : {}),
            },
            ...(req.tag !== undefined ? { tag: req.tag } : {}),
            ...(req.stdin !== undefined ? { stdin: req.stdin } : {}),
            ...(req.pty ? { pty: { cols: size?.cols ?? 80, rows: size?.rows ?? 24 } } : {}),
          },
          user,
        );
      });
      // Start's deadline (Connect-Timeout-Ms) is the process's lifetime, whether or not the client
      // is still connected when it passes (E2B semantics: timeoutMs 0 means no limit).
      const remaining = ctx.timeoutMs();
      if (remaining !== undefined) proc.killAfter(remaining);
      for await (const event of follow(proc, ctx)) yield create(StartResponseSchema, { event });
    },

    async *connect(req, ctx) {
      const proc = await guarded(() => pm.connectable(selectorOf(req.process)));
      for await (const event of follow(proc, ctx)) yield create(ConnectResponseSchema, { event });
    },

    update: (req) =>
      guarded(() => {
        const size = req.pty?.size;
        if (size) pm.get(selectorOf(req.process)).backend.resize(size.cols, size.rows);
        return {};
      }),

    streamInput: (reqs) =>
      guarded(async () => {
        let proc: ManagedProcess | undefined;
        for await (const r of reqs) {
          if (r.event.case === 'start') proc = pm.get(selectorOf(r.event.value.process));
          else if (r.event.case === 'data') {
            if (!proc) throw invalidArgument('the first StreamInput message must be start');
            const input = r.event.value.input?.input;
            if (input?.value) proc.backend.writeInput(input.value);
          }
        }
        return {};
      }),

    sendInput: (req) =>
      guarded(() => {
        const proc = pm.get(selectorOf(req.process));
        const input = req.input?.input;
        if (!input?.case) throw invalidArgument('input (stdin or pty) is required');
        proc.backend.writeInput(input.value);
        return {};
      }),

    sendSignal: (req) =>
      guarded(() => {
        const proc = pm.get(selectorOf(req.process));
        if (req.signal === Signal.SIGKILL) proc.backend.signal('SIGKILL');
        else if (req.signal === Signal.SIGTERM) proc.backend.signal('SIGTERM');
        else throw invalidArgument('signal must be SIGTERM or SIGKILL');
        return {};
      }),

    closeStdin: (req) =>
      guarded(() => {
        pm.get(selectorOf(req.process)).backend.closeInput();
        return {};
      }),
  };
}

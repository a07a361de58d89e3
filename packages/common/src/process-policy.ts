/** What the policy logs through: a pino logger fits. */
export interface PolicyLogger {
  error(obj: object, msg: string): void;
  fatal(obj: object, msg: string): void;
}

export interface ProcessPolicyOptions {
  logger: PolicyLogger;
  /** The process's clean stop (what SIGTERM runs); it may exit the process itself. */
  shutdown: (reason: string) => Promise<unknown>;
  /** How long the stop may take before the process exits anyway. */
  shutdownTimeoutMs: number;
  /** process.exit unless set (tests). */
  exit?: (code: number) => void;
  /** process unless set (tests). */
  target?: Pick<NodeJS.EventEmitter, 'on'>;
}

/**
 * The last resort for an error nothing caught, installed first thing by the node, the gateway
 * and the scheduler:
 *
 * - An unhandled rejection is logged and the process keeps serving. A promise that rejects has
 *   unwound its own async chain (a request's, a background task's): what it was changing belongs to
 *   that chain, other requests and the event loop are intact, and one bad request must not take
 *   the sandboxes of every other client down with it.
 * - An uncaught exception is logged and the process stops: the stop it runs on SIGTERM is tried
 *   (sandboxes paused, the cluster told), then it exits non-zero, at the latest after
 *   `shutdownTimeoutMs`. A throw escaped a synchronous step midway, so whatever that step was
 *   updating may be half done, and serving on from such state is what Node documents as unsafe;
 *   the supervisor (systemd, Kubernetes) starts a fresh process.
 *
 * The error is logged through the process's logger, which redacts secrets in logged fields.
 */
export function installProcessPolicy(o: ProcessPolicyOptions): void {
  const exit = o.exit ?? ((code: number) => process.exit(code));
  const target = o.target ?? process;
  let stopping = false;
  target.on('unhandledRejection', (reason: unknown) => {
    o.logger.error({ err: reason }, 'unhandled rejection; serving on');
  });
  target.on('uncaughtException', (err: unknown) => {
    o.logger.fatal({ err }, stopping ? 'uncaught exception while stopping' : 'uncaught exception; stopping');
    if (stopping) return;
    stopping = true;
    const deadline = setTimeout(() => exit(1), o.shutdownTimeoutMs);
    deadline.unref();
    void (async () => o.shutdown('uncaughtException'))()
      .catch((e: unknown) => o.logger.error({ err: e }, 'stopping after an uncaught exception failed'))
      .finally(() => {
        clearTimeout(deadline);
        exit(1);
      });
  });
}

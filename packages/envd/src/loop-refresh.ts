import type { Logger } from 'pino';
import { loadAddon } from './native.js';

/**
 * A restored checkpoint can carry a dead interest in the epoll instance of envd's event loop:
 * seen with runsc 2024-07-29 in about 1 capture in 20 taken while the node was busy restoring
 * other sandboxes. gVisor re-readies every interest it loads (epollInterest.afterLoad), and this
 * one belongs to a connection socket envd had already closed before the checkpoint, so from the
 * first epoll_wait on it reports EPOLLIN|EPOLLERR|EPOLLHUP for that socket's old fd number, for
 * good: EPOLL_CTL_DEL cannot remove it (the fd is closed, or is another file), libuv spins on it,
 * and the next connection accepted on that fd number gets the hang-up. After a partial read libuv
 * takes a hang-up for the end of the stream, so Node's HTTP server ends the connection (a FIN, no
 * answer) unless the handler answered in the same tick: /health and /init survive, a process start
 * or a /files call (which look the user up first) do not.
 *
 * native/loop-refresh.c rebuilds the loop's epoll instance from libuv's own watcher table, which
 * drops such an interest. It is done at /init (the node's first call to a created, forked or
 * snapshot-restored sandbox), at /health (the node's readiness probe after every restore, a
 * resume's included), and by a timer when the monotonic clock jumps or the loop spins: a
 * connection that lands on the dead fd number can be cut before its request is read, the probe's
 * included, and a resume right after its pause moves the clock on by less than a second.
 *
 * The addon sits beside envd.mjs in the tools bundle; elsewhere (tests, dist/) there is none and
 * refreshing does nothing.
 */
type Addon = { refreshEventLoop(): number };

const load = () => loadAddon<Addon>('loop-refresh');

/** True when the guard is available (envd runs from the tools bundle). */
export function loopRefreshAvailable(): boolean {
  return load() !== null;
}

/** Rebuilds the event loop's epoll instance; false when it cannot (no addon, or an error). */
export function refreshEventLoop(logger?: Logger, why = ''): boolean {
  const a = load();
  if (!a) return false;
  const r = a.refreshEventLoop();
  if (r !== 0) {
    logger?.warn({ errno: -r, why }, 'could not rebuild the event loop epoll instance');
    return false;
  }
  logger?.debug({ why }, 'event loop epoll instance rebuilt');
  return true;
}

/**
 * The share of a timer period the loop spent outside epoll_wait above which it counts as spinning:
 * a dead interest makes every epoll_wait return at once (measured on Linux with the unit test's
 * fixture: 99.8 % busy, against 0.1 % for an idle loop), while envd's own work rarely keeps it that
 * busy for a whole period.
 */
export const SPIN_UTILIZATION = 0.95;

/**
 * Why the guard rebuilds the loop after a period of its timer, or undefined: the monotonic clock
 * jumped past the period (a restore after a long pause; a stall that long too), or the loop spent
 * the period spinning, which is what a dead interest does whatever the pause's length (a resume
 * right after a pause moves the clock on by less than a second).
 */
export function refreshReason(
  elapsedMs: number,
  everyMs: number,
  jumpMs: number,
  utilization: number,
): string | undefined {
  if (elapsedMs > everyMs + jumpMs) return `clock jumped ${Math.round(elapsedMs)} ms`;
  if (utilization >= SPIN_UTILIZATION) return `event loop spinning (${Math.round(utilization * 100)} % busy)`;
  return undefined;
}

/**
 * Rebuilds the loop's epoll instance after a restore: on a timer of `everyMs`, whenever
 * refreshReason says so. A rebuild when nothing was wrong costs one epoll_create1 and one
 * epoll_ctl per fd.
 */
export function refreshAfterRestores(logger: Logger, everyMs = 250, jumpMs = 1000): () => void {
  if (!loopRefreshAvailable()) {
    logger.info('envd runs without native/loop-refresh.node: no restored-epoll guard');
    return () => undefined;
  }
  let last = performance.now();
  let used = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.now();
    const nowUsed = performance.eventLoopUtilization();
    const why = refreshReason(
      now - last,
      everyMs,
      jumpMs,
      performance.eventLoopUtilization(nowUsed, used).utilization,
    );
    if (why) refreshEventLoop(logger, why);
    last = now;
    used = nowUsed;
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

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
 * snapshot-restored sandbox) and whenever the monotonic clock jumps past a short timer (a resume).
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
 * Rebuilds the loop's epoll instance whenever the monotonic clock jumps past a `everyMs` timer by
 * more than `jumpMs`: after a restore it has moved on by the time the capture spent saved. A stall
 * of the loop that long also triggers it, which costs one epoll_create1 and one epoll_ctl per fd.
 */
export function refreshAfterRestores(logger: Logger, everyMs = 250, jumpMs = 1000): () => void {
  if (!loopRefreshAvailable()) {
    logger.info('envd runs without native/loop-refresh.node: no restored-epoll guard');
    return () => undefined;
  }
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    if (now - last > everyMs + jumpMs) refreshEventLoop(logger, `clock jumped ${Math.round(now - last)} ms`);
    last = now;
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

import type { IncomingMessage } from 'node:http';

/** Requests up to this size are read whole first, so they can be sent again. */
const REPLAYABLE_BYTES = 256 * 1024;

/** Whether a request's body is small enough to read whole first (it then can be sent again). */
export function isReplayable(req: IncomingMessage): boolean {
  return !req.headers['transfer-encoding'] && Number(req.headers['content-length'] ?? 0) <= REPLAYABLE_BYTES;
}

/**
 * Calls `onStall` when the client sends no byte of its request body for `idleMs`, so that a
 * slow-loris body cannot hold a proxied connection (and its sandbox's activity) forever. Time the
 * upstream holds the body back (a piped request is paused then) does not count. Attach it once the
 * body is being consumed (a 'data' listener would otherwise start the flow). Returns the stop.
 */
export function bodyDeadline(req: IncomingMessage, idleMs: number, onStall: () => void): () => void {
  if (req.readableEnded) return () => undefined;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    clearTimeout(timer);
    req.off('data', arm).off('end', stop).off('close', stop);
  };
  const fire = () => {
    if (req.isPaused()) return arm();
    stop();
    onStall();
  };
  function arm() {
    clearTimeout(timer);
    timer = setTimeout(fire, idleMs);
  }
  req.on('data', arm).once('end', stop).once('close', stop);
  arm();
  return stop;
}

/**
 * The whole body of a request (empty when it has none): 'stalled' when the client stopped
 * sending it for `idleMs`, 'gone' when it left before the end.
 */
export function readBody(req: IncomingMessage, idleMs: number): Promise<Buffer | 'stalled' | 'gone'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    bodyDeadline(req, idleMs, () => resolve('stalled'));
    req.once('end', () => resolve(Buffer.concat(chunks)));
    // An aborted request is destroyed with an error; its 'close' settles this.
    req.on('error', () => undefined);
    req.once('close', () => resolve(req.readableEnded ? Buffer.concat(chunks) : 'gone'));
  });
}

import type { Duplex } from 'node:stream';

/** What a write meets once the node has closed the connection. */
const PEER_GONE = new Set(['EPIPE', 'ECONNRESET']);

type WriteDone = (error?: Error | null) => void;

/**
 * Keeps a connection to a node reading after a write to it found the node gone. A node that
 * refuses a body (413 over its limit) answers before reading it and closes, and its kernel resets
 * the connection for the unread bytes. The gateway's next write of the body then fails, and Node
 * would destroy the socket with the node's answer unread in the kernel: the client would get a 502
 * for what was a 413. With the failure swallowed (and the rest of the body dropped) the socket reads
 * on: the answer arrives, or the reset ends the read side and the request fails as unreachable.
 */
export function readPastReset<S extends Duplex>(socket: S): S {
  let gone = false;
  const done = (cb: WriteDone) => (err?: Error | null) => {
    if (err && PEER_GONE.has((err as NodeJS.ErrnoException).code ?? '')) {
      gone = true;
      return cb();
    }
    cb(err);
  };
  const write = socket._write.bind(socket);
  socket._write = (chunk, encoding, cb) => (gone ? cb() : write(chunk, encoding, done(cb)));
  const writev = socket._writev?.bind(socket);
  if (writev) socket._writev = (chunks, cb) => (gone ? cb() : writev(chunks, done(cb)));
  return socket;
}

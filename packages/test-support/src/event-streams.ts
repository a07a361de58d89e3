import http from 'node:http';
import net from 'node:net';

/** What a client of an event stream has seen so far. */
export interface FollowedStream {
  status: number;
  retryAfter: string | undefined;
  /** Bytes received; grows while the stream flows. */
  received: number;
  /** The body of a refusal (any status but 200). */
  body: string;
  ended: boolean;
  /** Goes away. */
  close(): void;
}

/** A client that reads the stream at `path` (with `key` as its X-API-Key) as it arrives. */
export function followStream(port: number, path: string, key: string): FollowedStream {
  const req = http.get({ port, host: '127.0.0.1', path, headers: { 'x-api-key': key } }, (res) => {
    s.status = res.statusCode ?? 0;
    s.retryAfter = res.headers['retry-after'];
    res.on('data', (c: Buffer) => {
      s.received += c.length;
      if (s.status !== 200) s.body += c.toString();
    });
    res.on('close', () => (s.ended = true));
  });
  req.on('error', () => undefined);
  const s: FollowedStream = {
    status: 0,
    retryAfter: undefined,
    received: 0,
    body: '',
    ended: false,
    close: () => req.destroy(),
  };
  return s;
}

/** A raw connection that asks for the stream at `path` and never reads a byte of the answer. */
export function stalledStream(port: number, path: string, key: string): net.Socket {
  const socket = net.connect(port, '127.0.0.1', () => {
    socket.write(`GET ${path} HTTP/1.1\r\nhost: x\r\nx-api-key: ${key}\r\n\r\n`);
    socket.pause();
  });
  socket.on('error', () => undefined);
  return socket;
}

/** The connections `server` holds open. */
export function openConnections(server: net.Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
}

import { createServer as createHttp1, type RequestListener } from 'node:http';
import { createServer as createHttp2 } from 'node:http2';
import { createServer as createTcp, type Server, type Socket } from 'node:net';
import type { ConnectNodeAdapterOptions } from '@connectrpc/connect-node';

/** A request handler for both HTTP versions (the shape Connect's node adapter has). */
export type Handler = NonNullable<ConnectNodeAdapterOptions['fallback']>;

export interface Listener {
  /** The bound port (useful with port 0). */
  port: number;
  close(): Promise<void>;
}

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n');

/**
 * One TCP port for HTTP/1.1 and cleartext HTTP/2 (h2c with prior knowledge, as gRPC clients
 * speak it): the first bytes of a connection decide which server gets it. Node's cleartext HTTP/2
 * server cannot fall back to HTTP/1.1 by itself.
 */
export async function listen(host: string, port: number, handler: Handler): Promise<Listener> {
  const h1 = createHttp1(handler as unknown as RequestListener);
  // Watch streams last as long as the client wants; nothing may cut them off.
  h1.requestTimeout = 0;
  h1.keepAliveTimeout = 75_000;
  const h2 = createHttp2(handler as unknown as Parameters<typeof createHttp2>[0]);
  const sockets = new Set<Socket>();
  const tcp: Server = createTcp((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      const n = Math.min(first.length, H2_PREFACE.length);
      if (first.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) {
        // The HTTP/2 session reads the buffered bytes itself and then the socket's handle.
        h2.emit('connection', socket);
      } else {
        h1.emit('connection', socket);
        socket.resume();
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen(port, host, () => {
      tcp.off('error', reject);
      resolve();
    });
  });
  const address = tcp.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: async () => {
      await new Promise<void>((resolve) => {
        tcp.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      h1.close();
      h2.close();
    },
  };
}

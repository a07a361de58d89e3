import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * Relays TCP to S3. Stalled, it swallows whatever the node sends, so requests hang as on a
 * stuck network; `held` counts what it swallowed. Connections open when it stalls are cut, so no
 * request is half through.
 */
export class StallingRelay {
  stalled = false;
  held = 0;
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;

  constructor(upstreamPort: number) {
    this.server = createServer((client) => {
      const up = connect(upstreamPort, '127.0.0.1');
      const end = () => {
        for (const s of [client, up]) {
          s.destroy();
          this.sockets.delete(s);
        }
      };
      for (const s of [client, up]) {
        this.sockets.add(s);
        s.on('close', end).on('error', end);
      }
      client.on('data', (d) => (this.stalled ? this.held++ : up.write(d)));
      up.on('data', (d) => client.write(d));
    });
  }

  async listen(port: number): Promise<void> {
    this.server.listen(port, '127.0.0.1');
    await once(this.server, 'listening');
  }

  stall(): void {
    this.stalled = true;
    this.held = 0;
    for (const s of this.sockets) s.destroy();
  }

  flow(): void {
    this.stalled = false;
    for (const s of this.sockets) s.destroy();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.server.close();
    await once(this.server, 'close');
  }
}

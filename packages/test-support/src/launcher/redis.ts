import { connect } from 'node:net';

/** Whether a redis-server answers PING on 127.0.0.1:`port` (not while it loads its file). */
export function pingRedis(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('error', () => resolve(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => {
      resolve(d.toString().startsWith('+PONG'));
      s.destroy();
    });
  });
}

/** redis-server's arguments for a cluster's store: the append-only file survives a crash. */
export const aofRedisArgs = (port: number, dir: string): string[] => [
  ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir],
  // The scheduler's drain marks, bindings and reservations survive a Redis restart.
  ...['--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec'],
];

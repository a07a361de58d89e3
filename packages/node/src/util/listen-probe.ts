import { createServer } from 'node:net';

/**
 * Binds `host:port` and lets it go again: rejects with the bind's error (EADDRINUSE, EACCES,
 * EADDRNOTAVAIL) when the address cannot be listened on. A node checks this before it sets
 * anything up on the host, so a start on a taken port fails at once, as a service manager expects.
 */
export async function probeListen(host: string, port: number): Promise<void> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ host, port, exclusive: true }, () => resolve());
  });
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

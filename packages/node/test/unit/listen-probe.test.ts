import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { probeListen } from '../../src/util/index.js';

describe('probeListen', () => {
  it('refuses a taken port with EADDRINUSE, and lets a free one go again', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const { port } = taken.address() as AddressInfo;
    try {
      await expect(probeListen('127.0.0.1', port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
    } finally {
      await new Promise((r) => taken.close(r));
    }
    await probeListen('127.0.0.1', port);
    // The probe released it: the port can be listened on again.
    const again = createServer().listen(port, '127.0.0.1');
    await once(again, 'listening');
    await new Promise((r) => again.close(r));
  });
});

import type { LookupAddress } from 'node:dns';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { PeerLookup } from '../../src/peer-lookup.js';

/** A resolver whose answers the test gives, counting the lookups it was asked for. */
function resolver() {
  const asked: string[] = [];
  const waiting = new Map<string, { resolve(a: LookupAddress[]): void; reject(e: Error): void }>();
  const resolveAll = (name: string) =>
    new Promise<LookupAddress[]>((resolve, reject) => {
      asked.push(name);
      waiting.set(name, { resolve, reject });
    });
  const answer = (name: string, address = '10.0.0.1') => waiting.get(name)!.resolve([{ address, family: 4 }]);
  const fail = (name: string) =>
    waiting.get(name)!.reject(Object.assign(new Error('EAI_AGAIN'), { code: 'EAI_AGAIN' }));
  return { asked, resolveAll, answer, fail };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('PeerLookup', () => {
  it('asks once for a name however many sockets want it at the same time', async () => {
    const r = resolver();
    const peers = new PeerLookup(r.resolveAll);
    const all = Promise.all([
      peers.addresses('scheduler'),
      peers.addresses('scheduler'),
      peers.addresses('scheduler'),
    ]);
    await tick();
    expect(r.asked).toEqual(['scheduler']);
    r.answer('scheduler');
    expect((await all).map((a) => a[0]!.address)).toEqual(['10.0.0.1', '10.0.0.1', '10.0.0.1']);
  });

  it('serves an answer while fresh, then the last one while the name hangs or fails', async () => {
    const r = resolver();
    let now = 0;
    const peers = new PeerLookup(r.resolveAll, () => now);
    const first = peers.addresses('node1');
    await tick();
    r.answer('node1', '10.0.0.7');
    await first;
    now += 10_000;
    expect((await peers.addresses('node1'))[0]!.address).toBe('10.0.0.7');
    expect(r.asked).toHaveLength(1);
    // Old: looked up again in the background, and the old answer serves at once meanwhile.
    now += 60_000;
    expect((await peers.addresses('node1'))[0]!.address).toBe('10.0.0.7');
    expect((await peers.addresses('node1'))[0]!.address).toBe('10.0.0.7');
    expect(r.asked).toHaveLength(2);
    r.fail('node1');
    await tick();
    expect((await peers.addresses('node1'))[0]!.address).toBe('10.0.0.7');
  });

  it('fails a name never answered, and passes addresses through without asking', async () => {
    const r = resolver();
    const peers = new PeerLookup(r.resolveAll);
    const asking = peers.addresses('gone');
    await tick();
    r.fail('gone');
    await expect(asking).rejects.toMatchObject({ code: 'EAI_AGAIN' });
    expect(await peers.addresses('127.0.0.1')).toEqual([{ address: '127.0.0.1', family: 4 }]);
    expect(r.asked).toEqual(['gone']);
  });

  it("is a lookup Node's HTTP client connects with", async () => {
    const server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const peers = new PeerLookup(async () => [{ address: '127.0.0.1', family: 4 }]);
    try {
      const body = await new Promise<string>((resolve, reject) => {
        const req = request({ host: 'scheduler.invalid', port, path: '/', lookup: peers.lookup }, (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve(text));
        });
        req.on('error', reject);
        req.end();
      });
      expect(body).toBe('ok');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

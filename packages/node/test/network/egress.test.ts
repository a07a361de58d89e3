import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NetworkError } from '../../src/network/errors.js';
import type { ManagedSlot } from '../../src/network/managed-slot.js';
import { NetworkManager } from '../../src/network/manager.js';
import {
  INTERNET_ADDRESS,
  INTERNET_ROOT_SIDE,
  METADATA_ADDRESS,
  SPECIAL_PURPOSE_ADDRESSES,
  createTestInternet,
  fetchFrom,
  fetchFromHost,
  httpServerScript,
  isRoot,
  sh,
  silentLogger,
  startServer,
  stopServer,
  type TestInternet,
} from '@agentenv/test-support/network';

const INTERNET_URL = `http://${INTERNET_ADDRESS}/`;

async function listen(server: Server, host: string): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return (server.address() as AddressInfo).port;
}

/** The host's own uplink address (a route lookup; nothing is sent). */
async function uplinkAddress(): Promise<string | undefined> {
  const route = await sh('ip', ['-4', 'route', 'get', '192.0.2.123']).catch(() => '');
  return /\bsrc (\d+\.\d+\.\d+\.\d+)/.exec(route)?.[1];
}

describe.skipIf(!isRoot())('sandbox networking with real namespaces', () => {
  let internet: TestInternet | undefined;
  let manager: NetworkManager | undefined;
  const hostServers: Server[] = [];
  let anyPort = 0;
  let loopbackPort = 0;

  beforeAll(async () => {
    internet = await createTestInternet();
    manager = await NetworkManager.create({
      nodeTag: 'tn',
      hostRange: '10.237.1.0/24',
      poolSize: 2,
      logger: silentLogger,
    });
    const anyServer = createServer((_, res) => res.end('host-any'));
    const loopbackServer = createServer((_, res) => res.end('host-loopback'));
    hostServers.push(anyServer, loopbackServer);
    anyPort = await listen(anyServer, '0.0.0.0');
    loopbackPort = await listen(loopbackServer, '127.0.0.1');
  });

  afterAll(async () => {
    for (const server of hostServers) server.close();
    try {
      await manager?.shutdown();
    } finally {
      await internet?.close();
    }
  });

  const m = () => {
    if (!manager) throw new Error('manager not created');
    return manager;
  };

  it('lets a sandbox reach the internet by default', async () => {
    const slot = await m().acquire();
    try {
      expect(slot.netnsPath).toMatch(/^\/run\/netns\/aenv-tn-s\d+$/);
      expect(slot.sandboxAddress).toBe('10.0.2.2');
      const result = await fetchFrom(slot.names.sandboxNs, INTERNET_URL);
      expect(result).toEqual({ ok: true, body: `internet:${INTERNET_ADDRESS}` });
    } finally {
      await m().release(slot);
    }
  });

  it('applies allowInternet, denyOut and allowOut, and changes at run time', async () => {
    const slot = await m().acquire({ allowInternet: false, allowOut: [], denyOut: [] });
    try {
      const ns = slot.names.sandboxNs;
      expect((await fetchFrom(ns, INTERNET_URL)).ok).toBe(false);

      await m().setEgress(slot, { allowInternet: false, allowOut: ['203.0.113.0/24'], denyOut: [] });
      expect((await fetchFrom(ns, INTERNET_URL)).ok).toBe(true);
      expect(slot.egress.allowOut).toEqual(['203.0.113.0/24']);

      // Deny beats allow.
      await m().setEgress(slot, {
        allowInternet: true,
        allowOut: [INTERNET_ADDRESS],
        denyOut: ['203.0.113.0/24'],
      });
      expect((await fetchFrom(ns, INTERNET_URL)).ok).toBe(false);

      await m().setEgress(slot, { allowInternet: true, allowOut: [], denyOut: [] });
      expect((await fetchFrom(ns, INTERNET_URL)).ok).toBe(true);
    } finally {
      await m().release(slot);
    }
  });

  it('resets a released slot for the next sandbox: connections forgotten, default egress, old handle dead', async () => {
    const flows = (slot: ManagedSlot) =>
      sh('ip', ['netns', 'exec', slot.names.routerNs, 'conntrack', '-L', '-d', INTERNET_ADDRESS]);
    const first = await m().acquire({ allowInternet: false, allowOut: [INTERNET_ADDRESS], denyOut: [] });
    expect((await fetchFrom(first.names.sandboxNs, INTERNET_URL)).ok).toBe(true);
    expect(await flows(first)).toContain(INTERNET_ADDRESS);
    await m().release(first);

    // The pool hands out what it had first; the recycled slot comes after them.
    const taken: ManagedSlot[] = [];
    try {
      while (!taken.some((s) => s.index === first.index) && taken.length < 8) taken.push(await m().acquire());
      const again = taken.find((s) => s.index === first.index);
      expect(again).toBeDefined();
      expect(again).not.toBe(first);
      expect(again!.names).toEqual(first.names);
      expect(await flows(again!)).not.toContain(INTERNET_ADDRESS);
      expect(again!.egress).toEqual(m().config.defaultEgress);
      expect(await fetchFrom(again!.names.sandboxNs, INTERNET_URL)).toEqual({
        ok: true,
        body: `internet:${INTERNET_ADDRESS}`,
      });
      // The previous holder's handle no longer reaches the slot.
      await expect(
        m().setEgress(first, { allowInternet: false, allowOut: [], denyOut: [] }),
      ).rejects.toMatchObject({ code: 'UNKNOWN_SLOT' });
      expect((await fetchFrom(again!.names.sandboxNs, INTERNET_URL)).ok).toBe(true);
    } finally {
      for (const s of taken) await m().release(s);
    }
  });

  it('refuses bad rules without touching the slot', async () => {
    const slot = await m().acquire();
    try {
      for (const [rules, code] of [
        [{ allowInternet: true, allowOut: ['example.com'], denyOut: [] }, 'DOMAIN_NOT_SUPPORTED'],
        [{ allowInternet: true, allowOut: [], denyOut: ['10.0.0.0/33'] }, 'INVALID_CIDR'],
      ] as const) {
        const error = await m()
          .setEgress(slot, { ...rules, allowOut: [...rules.allowOut], denyOut: [...rules.denyOut] })
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(NetworkError);
        expect((error as NetworkError).code).toBe(code);
      }
      await expect(
        m().acquire({ allowInternet: true, allowOut: ['a.example'], denyOut: [] }),
      ).rejects.toThrow('domain entries are not supported');
      expect((await fetchFrom(slot.names.sandboxNs, INTERNET_URL)).ok).toBe(true);
    } finally {
      await m().release(slot);
    }
  });

  it('never reaches host services, link-local metadata or other slots, even with allowOut', async () => {
    const a = await m().acquire();
    const b = await m().acquire();
    let serverB: ChildProcess | undefined;
    try {
      serverB = await startServer(httpServerScript('slot-b', 8080), b.names.sandboxNs);
      // The servers exist: the node (root namespace) reaches all of them.
      expect(await fetchFromHost(`http://127.0.0.1:${loopbackPort}/`)).toEqual({
        ok: true,
        body: 'host-loopback',
      });
      expect(await fetchFromHost(`http://${a.rootSideAddress}:${anyPort}/`)).toEqual({
        ok: true,
        body: 'host-any',
      });
      expect(await fetchFromHost(`http://${b.hostAddress}:8080/`)).toEqual({ ok: true, body: 'slot-b' });

      // Try to open everything; always-denied ranges and the host stay closed anyway.
      await m().setEgress(a, { allowInternet: true, allowOut: ['0.0.0.0/0', METADATA_ADDRESS], denyOut: [] });
      const uplink = await uplinkAddress();
      const forbidden = [
        `http://127.0.0.1:${loopbackPort}/`,
        `http://${a.rootSideAddress}:${anyPort}/`,
        `http://${INTERNET_ROOT_SIDE}:${anyPort}/`,
        ...(uplink ? [`http://${uplink}:${anyPort}/`] : []),
        `http://${b.hostAddress}:8080/`,
        `http://${b.rootSideAddress}:${anyPort}/`,
        `http://${a.hostAddress}:8080/`,
        `http://${METADATA_ADDRESS}/`,
        ...SPECIAL_PURPOSE_ADDRESSES.map((a) => `http://${a}/`),
        // No IPv6 leaves a sandbox; an IPv4-mapped address goes out as IPv4 and meets the same rules.
        `http://[::ffff:${METADATA_ADDRESS}]/`,
        'http://[fc00::1]/',
        'http://[2001:db8::1]/',
      ];
      for (const url of forbidden) {
        expect(await fetchFrom(a.names.sandboxNs, url, 1), url).toMatchObject({ ok: false });
      }
      expect((await fetchFrom(a.names.sandboxNs, INTERNET_URL)).ok).toBe(true);
    } finally {
      stopServer(serverB);
      await m().release(a);
      await m().release(b);
    }
  });

  it('lets the node reach sandbox ports; two slots serve different content on the same address', async () => {
    const slots = [await m().acquire(), await m().acquire()];
    const servers: ChildProcess[] = [];
    try {
      for (const [i, slot] of slots.entries()) {
        servers.push(
          await startServer(
            httpServerScript(`sandbox-${i}`, 8080, slot.sandboxAddress),
            slot.names.sandboxNs,
          ),
        );
      }
      expect(new Set(slots.map((slot) => slot.hostAddress)).size).toBe(2);
      for (const [i, slot] of slots.entries()) {
        expect(slot.sandboxAddress).toBe('10.0.2.2');
        expect(await fetchFromHost(`http://${slot.hostAddress}:8080/`)).toEqual({
          ok: true,
          body: `sandbox-${i}`,
        });
      }
      // The node still reaches the sandbox when the sandbox may not go anywhere.
      await m().setEgress(slots[0] as ManagedSlot, {
        allowInternet: false,
        allowOut: [],
        denyOut: ['0.0.0.0/0'],
      });
      expect(await fetchFromHost(`http://${slots[0]?.hostAddress}:8080/`)).toEqual({
        ok: true,
        body: 'sandbox-0',
      });
    } finally {
      servers.forEach(stopServer);
      for (const slot of slots) await m().release(slot);
    }
  });

  it('reset() puts back what runsc takes from the namespace, idempotently', async () => {
    const slot = await m().acquire();
    try {
      const ns = slot.names.sandboxNs;
      // What runsc --network=sandbox does: the address (and with it the routes) leave the namespace.
      await sh('ip', ['-n', ns, 'addr', 'flush', 'dev', 'eth0']);
      expect((await fetchFrom(ns, INTERNET_URL, 1)).ok).toBe(false);
      await slot.reset();
      await slot.reset();
      expect((await fetchFrom(ns, INTERNET_URL)).ok).toBe(true);
      const links = await sh('ip', ['-n', ns, '-o', 'link', 'show']);
      expect(
        links
          .trim()
          .split('\n')
          .map((line) => line.split(':')[1]?.trim().split('@')[0]),
      ).toEqual(['lo', 'eth0']);
    } finally {
      await m().release(slot);
    }
    await expect(slot.reset()).rejects.toThrow('released');
    await m().release(slot);
  });

  it('relies on the root namespace too: with no always-denied ranges the host stays unreachable', async () => {
    const open = await NetworkManager.create({
      nodeTag: 'to',
      hostRange: '10.237.2.0/24',
      poolSize: 0,
      alwaysDenied: [],
      logger: silentLogger,
    });
    try {
      const a = await open.acquire();
      const b = await open.acquire();
      let serverB: ChildProcess | undefined;
      try {
        serverB = await startServer(httpServerScript('open-b', 8080), b.names.sandboxNs);
        // Without always-denied ranges the (test) metadata and special-purpose addresses are
        // reachable: the path exists, so the default configuration's refusal above is the rules'
        // doing.
        for (const address of [METADATA_ADDRESS, ...SPECIAL_PURPOSE_ADDRESSES]) {
          expect(await fetchFrom(a.names.sandboxNs, `http://${address}/`), address).toEqual({
            ok: true,
            body: `internet:${address}`,
          });
        }
        expect(await fetchFrom(a.names.sandboxNs, `http://[::ffff:${METADATA_ADDRESS}]/`)).toEqual({
          ok: true,
          body: `internet:${METADATA_ADDRESS}`,
        });
        const uplink = await uplinkAddress();
        for (const url of [
          `http://${INTERNET_ROOT_SIDE}:${anyPort}/`,
          `http://${a.rootSideAddress}:${anyPort}/`,
          ...(uplink ? [`http://${uplink}:${anyPort}/`] : []),
          `http://${b.hostAddress}:8080/`,
        ]) {
          expect(await fetchFrom(a.names.sandboxNs, url, 1), url).toMatchObject({ ok: false });
        }
        expect((await fetchFromHost(`http://${b.hostAddress}:8080/`)).body).toBe('open-b');
        // Slots of another node process (other tag) are just as unreachable.
        const other = await m().acquire();
        try {
          expect(
            (await fetchFrom(a.names.sandboxNs, `http://${other.rootSideAddress}:${anyPort}/`, 1)).ok,
          ).toBe(false);
        } finally {
          await m().release(other);
        }
      } finally {
        stopServer(serverB);
      }
    } finally {
      await open.shutdown();
    }
  });
});

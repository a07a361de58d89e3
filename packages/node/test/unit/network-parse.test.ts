import { describe, expect, it } from 'vitest';
import {
  parseInactiveLinks,
  parseIptablesFlavour,
  parseLinkNames,
  parseNetnsList,
  parseUsedPrefixes,
} from '../../src/network/parse.js';

describe('output parsers', () => {
  it('reads ip netns list with and without ids', () => {
    expect(parseNetnsList('aenv-n0-s1 (id: 3)\naenv-n0-r1 (id: 2)\nother\n\n')).toEqual([
      'aenv-n0-s1',
      'aenv-n0-r1',
      'other',
    ]);
  });

  it('reads link names from ip -o link, with and without @peer', () => {
    const output = [
      '1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT',
      '9: ae-n0-0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP',
      '12: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500',
    ].join('\n');
    expect(parseLinkNames(output)).toEqual(['lo', 'ae-n0-0', 'eth0']);
  });

  it('tells iptables flavours apart', () => {
    expect(parseIptablesFlavour('iptables v1.8.9 (nf_tables)\n')).toBe('nft');
    expect(parseIptablesFlavour('iptables v1.8.9 (legacy)\n')).toBe('legacy');
    expect(parseIptablesFlavour('iptables v1.6.1\n')).toBe('legacy');
  });

  it('collects addresses as /32s and route destinations', () => {
    const addrs = '2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever';
    const routes = [
      'default via 192.0.2.1 dev eth0',
      '192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2',
      'local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1',
      'blackhole 198.51.100.0/24',
    ].join('\n');
    expect(parseUsedPrefixes(addrs, routes).map((used) => used.prefix)).toEqual([
      '192.0.2.2/32',
      '192.0.2.0/24',
      '127.0.0.1',
      '198.51.100.0/24',
    ]);
  });

  it('finds the links that are set up but not activated by the kernel yet, or without carrier', () => {
    const out = [
      '1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/loopback 00:00:00:00:00:00',
      '2: up0@if23749: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noop state UP mode DEFAULT group default qlen 1000\\    link/ether ee:c9:c2:91:ea:62',
      '3: gw0@if2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state LOWERLAYERDOWN mode DEFAULT group default',
      '4: eth0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000',
      '5: spare@if9: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN mode DEFAULT group default qlen 1000',
    ].join('\n');
    expect(parseInactiveLinks(out)).toEqual(['up0', 'gw0']);
  });
});

import { BlockList, isIP } from 'node:net';

/** Why an address is not on the public internet, or undefined when it is. */
export type AddressClass = 'link-local' | 'loopback' | 'private';

function blocks(subnets: readonly string[]): BlockList {
  const list = new BlockList();
  for (const s of subnets) {
    const [net, bits] = s.split('/') as [string, string];
    list.addSubnet(net, Number(bits), isIP(net) === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are checked against the IPv4 rules too.
const CLASSES: readonly [AddressClass, BlockList][] = [
  ['link-local', blocks(['169.254.0.0/16', 'fe80::/10'])],
  ['loopback', blocks(['127.0.0.0/8', '::1/128'])],
  [
    'private',
    blocks([
      '0.0.0.0/8',
      '10.0.0.0/8',
      '100.64.0.0/10',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '::/128',
      'fc00::/7',
    ]),
  ],
];

/**
 * The class of a host as a URL names it (`hostname`, IPv6 in brackets), when it is an address
 * that is not public or the name `localhost`; undefined for a public address or any other name.
 */
export function addressClass(hostname: string): AddressClass | undefined {
  const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return 'loopback';
  const family = isIP(host);
  if (!family) return undefined;
  const type = family === 6 ? 'ipv6' : 'ipv4';
  return CLASSES.find(([, list]) => list.check(host, type))?.[0];
}

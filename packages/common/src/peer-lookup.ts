import { lookup as systemLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP } from 'node:net';

/** How long an answer is used before the name is looked up again. */
const FRESH_MS = 30_000;
/** How long the last answer still serves while lookups of its name fail or hang. */
const STALE_MS = 15 * 60_000;
/** Names remembered (a cluster's peers: schedulers, nodes). */
const MAX_NAMES = 4096;

interface Answer {
  addresses: LookupAddress[];
  atMs: number;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** The parts of Node's lookup used here, so the resolver itself can be replaced in unit tests. */
export type ResolveAll = (hostname: string) => Promise<LookupAddress[]>;

const resolveWithSystem: ResolveAll = (hostname) =>
  new Promise((resolve, reject) => {
    const opts: LookupAllOptions = { all: true };
    systemLookup(hostname, opts, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

/**
 * A `lookup` for sockets to the cluster's own peers (scheduler replicas, nodes), for when a peer
 * goes away. Node's lookup runs getaddrinfo on the four threads of libuv's pool, and the name of a
 * stopped peer can hang there for many seconds (Docker's DNS forwards the name of a stopped
 * container to the host's resolvers, which may not answer): a few calls to a dead replica then
 * hold every thread, so the live replica's name, and the process's file I/O, wait behind them.
 * Here one lookup at most is under way per name, its answer serves for FRESH_MS, and while a
 * lookup fails or hangs the last answer keeps serving (a stopped peer's old address fails fast,
 * and a failover moves on).
 */
export class PeerLookup {
  private readonly answers = new Map<string, Answer>();
  private readonly pending = new Map<string, Promise<LookupAddress[]>>();

  constructor(
    private readonly resolveAll: ResolveAll = resolveWithSystem,
    private readonly now: () => number = Date.now,
  ) {}

  /** Node's `lookup` signature, as http.request, net.connect and http2.connect take it. */
  readonly lookup = (hostname: string, options: unknown, callback: LookupCallback): void => {
    const o = (typeof options === 'object' && options !== null ? options : {}) as {
      all?: boolean;
      family?: number | string;
    };
    this.addresses(hostname).then(
      (all) => {
        const family = o.family === 'IPv4' ? 4 : o.family === 'IPv6' ? 6 : Number(o.family ?? 0);
        const fit = family === 4 || family === 6 ? all.filter((a) => a.family === family) : all;
        if (fit.length === 0) {
          const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
          err.code = 'ENOTFOUND';
          callback(err, o.all ? [] : '');
        } else if (o.all) callback(null, fit);
        else callback(null, fit[0]!.address, fit[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, o.all ? [] : ''),
    );
  };

  async addresses(hostname: string): Promise<LookupAddress[]> {
    const ip = isIP(hostname);
    if (ip) return [{ address: hostname, family: ip }];
    const known = this.answers.get(hostname);
    const age = known ? this.now() - known.atMs : Infinity;
    if (known && age < FRESH_MS) return known.addresses;
    const asking = this.ask(hostname);
    // A name looked up again while its last answer is recent enough: that answer serves now.
    if (known && age < STALE_MS) {
      asking.catch(() => undefined);
      return known.addresses;
    }
    return asking;
  }

  private ask(hostname: string): Promise<LookupAddress[]> {
    let asking = this.pending.get(hostname);
    if (asking) return asking;
    asking = this.resolveAll(hostname)
      .then((addresses) => {
        this.answers.delete(hostname);
        this.answers.set(hostname, { addresses, atMs: this.now() });
        if (this.answers.size > MAX_NAMES) this.answers.delete(this.answers.keys().next().value!);
        return addresses;
      })
      .finally(() => this.pending.delete(hostname));
    this.pending.set(hostname, asking);
    return asking;
  }
}

/** The process's lookup for its peers: one cache for every client of the same names. */
export const peerLookup = new PeerLookup();

import { request } from 'node:http';

export interface ProbeAnswer {
  status: number;
  /** The first bytes of the body (streams are cut once their headers arrive). */
  body: string;
}

export interface ProbeRequest {
  method: string;
  /** Sent as it is: no normalisation of dot segments or escapes, unlike fetch. */
  path: string;
  /** A list of values sends the header once per value. */
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  timeoutMs?: number;
}

/**
 * One request to 127.0.0.1:`port` with its path on the wire exactly as given (what an attacker
 * sends with `curl --path-as-is`). An event stream is cut once its status is known.
 */
export function probe(port: number, r: ProbeRequest): Promise<ProbeAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method: r.method,
      path: r.path,
      headers: r.headers,
      agent: false,
    });
    req.on('error', reject);
    // A request that never answers is a failure of its own, named, not a test's timeout.
    req.setTimeout(r.timeoutMs ?? 10_000, () =>
      req.destroy(new Error(`${r.method} ${r.path}: no answer in ${r.timeoutMs ?? 10_000} ms`)),
    );
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (String(res.headers['content-type']).startsWith('text/event-stream')) {
        res.destroy();
        return resolve({ status, body: '' });
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString('utf8').slice(0, 2000) }));
    });
    req.end(r.body);
  });
}

/** A path with one escape of a letter in each segment (`/dashboard/%61pi`): the same route. */
export function percentEncoded(path: string): string {
  return path.replace(/\/([a-zA-Z])/g, (_m, c: string) => `/%${c.charCodeAt(0).toString(16)}`);
}

/**
 * The ways an attacker spells `path` to slip past a check on its raw form, each with whether it
 * is still the same route once decoded (`percent-encoded`), or another path (`double-encoded`
 * reads as a literal `%61`, `mixed-case`, and `dot-segment`s that no server may resolve into a
 * route the raw path did not name).
 */
export function pathVariants(path: string): { name: string; path: string; sameRoute: boolean }[] {
  const first = path.split('/')[1] ?? '';
  const rest = path.slice(first.length + 1);
  return [
    { name: 'as is', path, sameRoute: true },
    { name: 'percent-encoded', path: percentEncoded(path), sameRoute: true },
    { name: 'double-encoded', path: percentEncoded(path).replace(/%/g, '%25'), sameRoute: false },
    {
      name: 'mixed-case',
      path: `/${first.charAt(0).toUpperCase()}${first.slice(1)}${rest}`,
      sameRoute: false,
    },
    { name: 'dot-segment', path: `/${first}/x/..${rest}`, sameRoute: false },
    { name: 'encoded dot-segment', path: `/${first}/x/%2e%2e${rest}`, sameRoute: false },
    { name: 'from /health', path: `/health/..${path}`, sameRoute: false },
  ];
}

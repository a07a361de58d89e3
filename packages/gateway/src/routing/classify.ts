import { DomainError } from '@agentenv/common';

/**
 * What the gateway does with a control-plane request (sandbox traffic is recognised before this,
 * by the node's own routing function). Pure, so every path is unit-tested.
 */
export type ControlRoute =
  | { kind: 'health' | 'metrics' }
  | { kind: 'nodes' }
  | { kind: 'node'; nodeId: string }
  | { kind: 'events' }
  | { kind: 'sandbox-events'; sandboxId: string }
  /** A new sandbox: placed by Schedule. */
  | { kind: 'create'; cold: boolean; v2: boolean }
  | { kind: 'list'; v2: boolean }
  | { kind: 'fork'; sandboxId: string }
  /** Connect or resume: a paused sandbox may move to another node. */
  | { kind: 'resume'; sandboxId: string }
  /** A pause: routed to its node, and recorded with the scheduler before the client hears of it. */
  | { kind: 'pause'; sandboxId: string }
  /** A snapshot of a sandbox: routed to its node, which then holds the capture in its cache. */
  | { kind: 'snapshot'; sandboxId: string }
  /** Any other call on one sandbox: routed to its node. */
  | { kind: 'sandbox'; sandboxId: string }
  /** Template builds keep their state on the node that runs them. */
  | { kind: 'template'; templateId?: string; register: boolean }
  /** GET /volumes: every node's volumes, merged. */
  | { kind: 'volumes' }
  /**
   * A call on one volume, sent to the node that answers `probe` for it; the content API is
   * authorised by the volume's own token (on the node), not by the API key.
   */
  | { kind: 'volume' | 'volume-content'; probe: string }
  /** Served from the shared repository: any healthy node answers. */
  | { kind: 'any-node' };

/** Who may call a route: `public` ones answer anyone; every other one needs the API key. */
export const ROUTE_ACCESS: Record<ControlRoute['kind'], 'public' | 'key'> = {
  health: 'public',
  metrics: 'public',
  nodes: 'key',
  node: 'key',
  events: 'key',
  'sandbox-events': 'key',
  create: 'key',
  list: 'key',
  fork: 'key',
  resume: 'key',
  pause: 'key',
  snapshot: 'key',
  sandbox: 'key',
  template: 'key',
  volumes: 'key',
  volume: 'key',
  'volume-content': 'public',
  'any-node': 'key',
};

/** A path segment's value; a malformed escape is the client's error, not the gateway's. */
function segment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new DomainError('invalid', `bad escape in path segment ${JSON.stringify(s.slice(0, 100))}`);
  }
}

const ID = '([a-z0-9]{1,64})';
const SANDBOX = new RegExp(`^/(v2/)?sandboxes/${ID}(/.*)?$`);
const VOLUME = /^\/volumes\/([^/]+)$/;
const VOLUME_CONTENT = /^\/volumecontent\/([^/]+)(\/.*)?$/;

/** The route of a volume call, if it is one (POST /volumes goes to any node, like a template's). */
function volumeRoute(method: string, path: string): ControlRoute | undefined {
  if (path === '/volumes' && method === 'GET') return { kind: 'volumes' };
  const vol = VOLUME.exec(path);
  if (vol) return { kind: 'volume', probe: `/volumes/${encodeURIComponent(segment(vol[1]!))}` };
  const content = VOLUME_CONTENT.exec(path);
  if (content) {
    const id = encodeURIComponent(segment(content[1]!));
    return { kind: 'volume-content', probe: `/volumecontent/${id}/path?path=%2F` };
  }
  return undefined;
}

/** The route of a control request, from its target as `normalizeTarget` (@agentenv/common) left it. */
export function classify(method: string, url: string): ControlRoute {
  const path = url.split('?')[0]!;
  if (path === '/health') return { kind: 'health' };
  if (path === '/metrics') return { kind: 'metrics' };
  if (path === '/nodes') return { kind: 'nodes' };
  const node = /^\/nodes\/([^/]+)$/.exec(path);
  if (node) return { kind: 'node', nodeId: segment(node[1]!) };
  if (path === '/events' && method === 'GET') return { kind: 'events' };
  if (path === '/sandboxes' || path === '/v2/sandboxes') {
    const v2 = path.startsWith('/v2/');
    if (method === 'POST') return { kind: 'create', cold: false, v2 };
    if (method === 'GET') return { kind: 'list', v2 };
  }
  if (path === '/sandboxes-cold' && method === 'POST') return { kind: 'create', cold: true, v2: false };
  const sb = SANDBOX.exec(path);
  if (sb) {
    const sandboxId = sb[2]!;
    const rest = sb[3] ?? '';
    if (method === 'POST' && rest === '/fork' && !sb[1]) return { kind: 'fork', sandboxId };
    if (method === 'POST' && (rest === '/connect' || (rest === '/resume' && !sb[1])))
      return { kind: 'resume', sandboxId };
    if (method === 'GET' && rest === '/events' && !sb[1]) return { kind: 'sandbox-events', sandboxId };
    if (method === 'POST' && rest === '/snapshots' && !sb[1]) return { kind: 'snapshot', sandboxId };
    if (method === 'POST' && rest === '/pause' && !sb[1]) return { kind: 'pause', sandboxId };
    return { kind: 'sandbox', sandboxId };
  }
  if (method === 'POST' && ['/v3/templates', '/v2/templates', '/templates'].includes(path))
    return { kind: 'template', register: true };
  const volume = volumeRoute(method, path);
  if (volume) return volume;
  const tpl = /^\/(?:v2\/)?templates\/([^/]+)\/(files|builds)(\/.*)?$/.exec(path);
  if (tpl) return { kind: 'template', templateId: segment(tpl[1]!), register: false };
  return { kind: 'any-node' };
}

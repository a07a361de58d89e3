import { DomainError } from './errors.js';

/** One listed item as a node returns it; only the sort key and the id are read here. */
export type Listed = Record<string, unknown>;

/** Where a node's listing continues: its own page token, and items of that page already sent. */
export interface NodeCursor {
  token?: string;
  skip: number;
}

/** A merged listing's position: one cursor per node; `null` = that node has nothing left. */
export type MergePosition = Record<string, NodeCursor | null>;

export function encodeMergeToken(pos: MergePosition): string {
  return Buffer.from(JSON.stringify({ v: 1, n: pos })).toString('base64url');
}

export function decodeMergeToken(token: string | undefined): MergePosition | undefined {
  if (!token) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString()) as { v?: unknown; n?: unknown };
    if (parsed.v === 1 && parsed.n && typeof parsed.n === 'object' && !Array.isArray(parsed.n)) {
      const pos: MergePosition = {};
      for (const [node, c] of Object.entries(parsed.n as Record<string, unknown>)) {
        if (c === null) pos[node] = null;
        else if (isCursor(c)) pos[node] = c.token === undefined ? { skip: c.skip } : c;
        else throw new Error('bad cursor');
      }
      return pos;
    }
  } catch {
    // fall through
  }
  throw new DomainError('invalid', 'invalid nextToken');
}

function isCursor(c: unknown): c is NodeCursor {
  if (!c || typeof c !== 'object') return false;
  const { token, skip } = c as { token?: unknown; skip?: unknown };
  return (
    (token === undefined || typeof token === 'string') &&
    typeof skip === 'number' &&
    Number.isInteger(skip) &&
    skip >= 0
  );
}

export type Compare = (a: Listed, b: Listed) => number;

/**
 * The order nodes list in, for any sort key: by `key` (ISO times and numbers compare as they
 * are), descending unless `order=asc`, ties broken by sandbox id ascending like the node does.
 */
export function comparator<T extends object = Listed>(
  key: string,
  order: 'asc' | 'desc',
): (a: T, b: T) => number {
  const sign = order === 'asc' ? 1 : -1;
  return (a, b) => {
    const [l, r] = [a as Listed, b as Listed];
    const x = l[key] as string | number | undefined;
    const y = r[key] as string | number | undefined;
    if (x !== y) {
      if (x === undefined) return 1;
      if (y === undefined) return -1;
      return (x < y ? -1 : 1) * sign;
    }
    return String(l.sandboxID ?? '').localeCompare(String(r.sandboxID ?? ''));
  };
}

/** A node's items from its cursor on, as fetched; `exhausted` when the node has no more. */
export interface NodeBuffer {
  /** The node pages the buffer was read from, in order, each with the token it was fetched with. */
  pages: { token?: string; items: Listed[]; next?: string }[];
  /** Items of the first page already sent in earlier merged pages. */
  skip: number;
}

/**
 * One merged page: the first `limit` items of all nodes' buffers in `compare` order, and where
 * each node continues. Every buffer must hold at least `limit` items or all of its node's rest,
 * so no unread node page can hold an item that sorts before one taken here.
 */
export function mergePage(
  buffers: Record<string, NodeBuffer>,
  compare: Compare,
  limit: number,
): { items: Listed[]; position: MergePosition; more: boolean } {
  const heads = Object.entries(buffers).map(([node, b]) => ({
    node,
    b,
    flat: b.pages.flatMap((p) => p.items).slice(b.skip),
    taken: 0,
  }));
  const items: Listed[] = [];
  while (items.length < limit) {
    let best: (typeof heads)[number] | undefined;
    for (const h of heads) {
      const cand = h.flat[h.taken];
      if (cand && (!best || compare(cand, best.flat[best.taken]!) < 0)) best = h;
    }
    if (!best) break;
    items.push(best.flat[best.taken++]!);
  }
  const position: MergePosition = {};
  let more = false;
  for (const h of heads) {
    position[h.node] = cursorAfter(h.b, h.taken);
    if (position[h.node]) more = true;
  }
  return { items, position, more };
}

/** The cursor after `taken` more items of a buffer; null when the node has nothing left. */
function cursorAfter(b: NodeBuffer, taken: number): NodeCursor | null {
  let skip = b.skip + taken;
  for (const page of b.pages) {
    if (skip < page.items.length) return { ...(page.token ? { token: page.token } : {}), skip };
    skip -= page.items.length;
    if (!page.next) return null;
    if (page === b.pages.at(-1)) return { token: page.next, skip: 0 };
  }
  return null;
}

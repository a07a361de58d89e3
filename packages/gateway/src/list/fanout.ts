import {
  encodeMergeToken,
  mergePage,
  type Compare,
  type Listed,
  type MergePosition,
  type NodeBuffer,
  type NodeCursor,
} from '@agentenv/common';

/** One page of one node's listing (its own `nextToken`/`x-next-token`). */
export type FetchPage = (node: string, token: string | undefined, limit: number) => Promise<NodePage>;
export interface NodePage {
  items: Listed[];
  next?: string;
}

/**
 * Reads a node's listing from `cursor` until it holds `limit` items past the skip or the node has
 * no more, so merging `limit` items from it is safe.
 */
async function fill(node: string, cursor: NodeCursor, limit: number, fetch: FetchPage): Promise<NodeBuffer> {
  const pages: NodeBuffer['pages'] = [];
  let token = cursor.token;
  let have = -cursor.skip;
  for (;;) {
    const page = await fetch(node, token, limit);
    pages.push({ ...(token ? { token } : {}), items: page.items, ...(page.next ? { next: page.next } : {}) });
    have += page.items.length;
    // An empty page with a token would loop forever on a misbehaving node.
    if (have >= limit || !page.next || page.items.length === 0) break;
    token = page.next;
  }
  return { pages, skip: cursor.skip };
}

/**
 * One page of the listing of every node merged in `compare` order. Nodes missing from the
 * position (joined since the first page) are read from their start; nodes no longer listed are
 * dropped; a node that fails to answer keeps its cursor, so a later page reads it again.
 */
export async function mergedList(opts: {
  nodes: readonly string[];
  position: MergePosition | undefined;
  limit: number;
  compare: Compare;
  fetch: FetchPage;
  onNodeError?: (node: string, err: unknown) => void;
}): Promise<{ items: Listed[]; nextToken?: string }> {
  const cursors = new Map<string, NodeCursor>();
  // Finished nodes stay finished, or a later page would read them again from their start.
  const done: MergePosition = {};
  for (const node of opts.nodes) {
    const c = opts.position ? opts.position[node] : { skip: 0 };
    if (c === null) done[node] = null;
    else cursors.set(node, c ?? { skip: 0 });
  }
  const buffers: Record<string, NodeBuffer> = {};
  const failed: MergePosition = {};
  await Promise.all(
    [...cursors].map(async ([node, c]) => {
      try {
        buffers[node] = await fill(node, c, opts.limit, opts.fetch);
      } catch (err) {
        opts.onNodeError?.(node, err);
        failed[node] = c;
      }
    }),
  );
  const { items, position, more } = mergePage(buffers, opts.compare, opts.limit);
  const next = { ...done, ...position, ...failed };
  const anyLeft = more || Object.keys(failed).length > 0;
  return anyLeft ? { items, nextToken: encodeMergeToken(next) } : { items };
}

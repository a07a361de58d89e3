import { describe, expect, it } from 'vitest';
import { mergedList, type FetchPage } from '../../src/list/fanout.js';
import { comparator, decodeMergeToken, encodeMergeToken, type Listed } from '@agentenv/common';

/** A node listing like the node does: offset tokens over a fixed newest-first array. */
function nodeOf(
  items: Listed[],
): (token: string | undefined, limit: number) => { items: Listed[]; next?: string } {
  return (token, limit) => {
    const o = token ? Number(token) : 0;
    const page = items.slice(o, o + limit);
    return o + limit < items.length ? { items: page, next: String(o + limit) } : { items: page };
  };
}

const at = (id: string, minute: number): Listed => ({
  sandboxID: id,
  startedAt: new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString(),
});

function cluster(spec: Record<string, Listed[]>) {
  const desc = comparator('startedAt', 'desc');
  const nodes = Object.fromEntries(
    Object.entries(spec).map(([n, items]) => [n, nodeOf([...items].sort(desc))]),
  );
  const calls: string[] = [];
  const fetch: FetchPage = async (node, token, limit) => {
    calls.push(`${node}:${token ?? ''}:${limit}`);
    return nodes[node]!(token, limit);
  };
  return { fetch, calls };
}

async function readAll(fetch: FetchPage, nodes: string[], limit: number, order: 'asc' | 'desc' = 'desc') {
  const pages: string[][] = [];
  let token: string | undefined;
  for (let i = 0; i < 100; i++) {
    const r = await mergedList({
      nodes,
      position: decodeMergeToken(token),
      limit,
      compare: comparator('startedAt', order),
      fetch,
    });
    pages.push(r.items.map((x) => x.sandboxID as string));
    token = r.nextToken;
    if (!token) return pages;
  }
  throw new Error('pagination did not end');
}

describe('merged listing over nodes', () => {
  const spec = {
    a: [at('a1', 1), at('a2', 5), at('a3', 9), at('a4', 10), at('a5', 11)],
    b: [at('b1', 2), at('b2', 3), at('b3', 4)],
    c: [at('c1', 6), at('c2', 7), at('c3', 8), at('c4', 12)],
  };
  const all = Object.values(spec)
    .flat()
    .sort(comparator('startedAt', 'desc'))
    .map((x) => x.sandboxID);

  it.each([1, 2, 3, 5, 12, 100])('pages of %i hold every sandbox once, newest first', async (limit) => {
    const { fetch } = cluster(spec);
    const pages = await readAll(fetch, ['a', 'b', 'c'], limit);
    expect(pages.flat()).toEqual(all);
    for (const p of pages.slice(0, -1)) expect(p).toHaveLength(limit);
  });

  it('merges ascending when asked, whatever the nodes order', async () => {
    const asc = Object.fromEntries(Object.entries(spec).map(([k, v]) => [k, [...v]]));
    const nodes = Object.fromEntries(
      Object.entries(asc).map(([n, items]) => [n, nodeOf([...items].sort(comparator('startedAt', 'asc')))]),
    );
    const fetch: FetchPage = async (node, token, limit) => nodes[node]!(token, limit);
    const pages = await readAll(fetch, ['a', 'b', 'c'], 4, 'asc');
    expect(pages.flat()).toEqual([...all].reverse());
  });

  it('breaks ties of the sort key by sandbox id', async () => {
    const { fetch } = cluster({ x: [at('m', 1), at('z', 1)], y: [at('a', 1)] });
    expect((await readAll(fetch, ['x', 'y'], 2)).flat()).toEqual(['a', 'm', 'z']);
  });

  it('reads more pages of a node when its page is short past the skip', async () => {
    const { fetch, calls } = cluster(spec);
    const first = await mergedList({
      nodes: ['a', 'b', 'c'],
      position: undefined,
      limit: 3,
      compare: comparator('startedAt', 'desc'),
      fetch,
    });
    expect(first.items.map((x) => x.sandboxID)).toEqual(['c4', 'a5', 'a4']);
    calls.length = 0;
    // Node a has 1 item left on its page of 3 (skip 2): its next page is read too.
    await mergedList({
      nodes: ['a', 'b', 'c'],
      position: decodeMergeToken(first.nextToken),
      limit: 3,
      compare: comparator('startedAt', 'desc'),
      fetch,
    });
    expect(calls.filter((c) => c.startsWith('a:'))).toEqual(['a::3', 'a:3:3']);
  });

  it('reads a node that joined after the first page from its start, and drops a node gone', async () => {
    const { fetch } = cluster(spec);
    const first = await mergedList({
      nodes: ['a', 'b'],
      position: undefined,
      limit: 2,
      compare: comparator('startedAt', 'desc'),
      fetch,
    });
    const second = await mergedList({
      nodes: ['b', 'c'],
      position: decodeMergeToken(first.nextToken),
      limit: 100,
      compare: comparator('startedAt', 'desc'),
      fetch,
    });
    expect(first.items.map((x) => x.sandboxID)).toEqual(['a5', 'a4']);
    expect(second.items.map((x) => x.sandboxID)).toEqual(['c4', 'c3', 'c2', 'c1', 'b3', 'b2', 'b1']);
    expect(second.nextToken).toBeUndefined();
  });

  it('keeps a failing node in the token so a later page reads it again', async () => {
    const { fetch } = cluster(spec);
    let down = true;
    const flaky: FetchPage = (node, token, limit) =>
      node === 'b' && down ? Promise.reject(new Error('ECONNREFUSED')) : fetch(node, token, limit);
    const errors: string[] = [];
    const first = await mergedList({
      nodes: ['a', 'b'],
      position: undefined,
      limit: 100,
      compare: comparator('startedAt', 'desc'),
      fetch: flaky,
      onNodeError: (n) => errors.push(n),
    });
    expect(errors).toEqual(['b']);
    expect(first.items).toHaveLength(5);
    down = false;
    const second = await mergedList({
      nodes: ['a', 'b'],
      position: decodeMergeToken(first.nextToken),
      limit: 100,
      compare: comparator('startedAt', 'desc'),
      fetch: flaky,
    });
    expect(second.items.map((x) => x.sandboxID)).toEqual(['b3', 'b2', 'b1']);
    expect(second.nextToken).toBeUndefined();
  });

  it('stops on a node that returns an empty page with a token', async () => {
    const fetch: FetchPage = async () => ({ items: [], next: 'again' });
    const r = await mergedList({
      nodes: ['a'],
      position: undefined,
      limit: 10,
      compare: comparator('startedAt', 'desc'),
      fetch,
    });
    expect(r.items).toEqual([]);
  });
});

describe('merge tokens', () => {
  it('round-trip a position', () => {
    const pos = { a: { token: 'x', skip: 2 }, b: null, c: { skip: 0 } };
    expect(decodeMergeToken(encodeMergeToken(pos))).toEqual(pos);
    expect(decodeMergeToken(undefined)).toBeUndefined();
  });

  it.each([
    'garbage',
    Buffer.from('{"v":2,"n":{}}').toString('base64url'),
    encodeMergeToken({ a: { skip: -1 } }),
  ])('refuse a bad token %s with 400', (t) => {
    expect(() => decodeMergeToken(t)).toThrow(expect.objectContaining({ kind: 'invalid' }));
  });
});

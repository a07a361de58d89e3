import { describe, expect, it } from 'vitest';
import {
  decodePageCursor,
  encodePageCursor,
  parseListQuery,
  parseMetadataQuery,
  queryPage,
  type Listable,
  type RawListQuery,
} from '../../src/sandbox-query.js';

const at = (min: number) => new Date(Date.UTC(2026, 0, 1, 0, min)).toISOString();
const sbx = (id: string, min: number, extra: Partial<Listable> = {}): Listable => ({
  sandboxID: id,
  templateID: 'tpl-base',
  alias: 'base',
  startedAt: at(min),
  state: 'running',
  metadata: {},
  ...extra,
});

const items: Listable[] = [
  sbx('a', 1, { metadata: { team: 'x', 'two words': 'a&b=c' } }),
  sbx('b', 2, { state: 'paused', templateID: 'tpl-py', alias: 'py' }),
  sbx('c', 3, { metadata: { team: 'x' } }),
  sbx('d', 3),
  sbx('e', 5, { state: 'paused' }),
];
const ids = (p: { page: Listable[] }) => p.page.map((s) => s.sandboxID);
const q = (raw: RawListQuery) => parseListQuery(raw);

/** Every page of a query, following the tokens. */
function walk(all: Listable[], raw: RawListQuery): string[][] {
  const pages: string[][] = [];
  let token: string | undefined;
  do {
    const r = queryPage(all, q({ ...raw, ...(token ? { nextToken: token } : {}) }));
    pages.push(ids(r));
    token = r.nextToken;
  } while (token && pages.length < 20);
  return pages;
}

describe('sandbox list query', () => {
  it('orders newest first by default, oldest first on asc, ties by id', () => {
    expect(ids(queryPage(items, q({})))).toEqual(['e', 'd', 'c', 'b', 'a']);
    expect(ids(queryPage(items, q({ order: 'asc' })))).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('filters by state, metadata, template id or name, and start time (inclusive)', () => {
    expect(ids(queryPage(items, q({ state: 'paused' })))).toEqual(['e', 'b']);
    expect(ids(queryPage(items, q({ state: ['running', 'paused'] })))).toHaveLength(5);
    expect(ids(queryPage(items, q({ state: 'running,paused' })))).toHaveLength(5);
    expect(ids(queryPage(items, q({ metadata: 'team=x' })))).toEqual(['c', 'a']);
    // The SDK encodes keys and values once more inside the metadata parameter.
    const meta = new URLSearchParams({
      [encodeURIComponent('two words')]: encodeURIComponent('a&b=c'),
    }).toString();
    expect(ids(queryPage(items, q({ metadata: meta })))).toEqual(['a']);
    expect(ids(queryPage(items, q({ template: 'py' })))).toEqual(['b']);
    expect(ids(queryPage(items, q({ template: 'tpl-py' })))).toEqual(['b']);
    expect(ids(queryPage(items, q({ template: 'nope' })))).toEqual([]);
    expect(ids(queryPage(items, q({ startedAfter: at(3), order: 'asc' })))).toEqual(['c', 'd', 'e']);
  });

  it('pages with tokens that continue after the last sandbox handed out', () => {
    expect(walk(items, { limit: 2 })).toEqual([['e', 'd'], ['c', 'b'], ['a']]);
    expect(walk(items, { limit: 2, order: 'asc' })).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
    expect(walk(items, { limit: 5 })).toEqual([['e', 'd', 'c', 'b', 'a']]);
    // A sandbox created between two pages does not shift the next page (keys, not offsets).
    const first = queryPage(items, q({ limit: 2 }));
    const grown = [...items, sbx('z', 9)];
    expect(ids(queryPage(grown, q({ limit: 2, nextToken: first.nextToken! })))).toEqual(['c', 'b']);
  });

  it('counts running sandboxes that match, before paging, when running ones were asked for', () => {
    expect(queryPage(items, q({ limit: 1 })).totalRunning).toBe(3);
    expect(queryPage(items, q({ metadata: 'team=x', limit: 1 })).totalRunning).toBe(2);
    expect(queryPage(items, q({ state: 'paused' })).totalRunning).toBeUndefined();
  });

  it('refuses bad input with a message naming it', () => {
    expect(() => q({ state: 'dead' })).toThrow(/invalid state 'dead'/);
    expect(() => q({ order: 'up' })).toThrow(/invalid order 'up'/);
    expect(() => q({ startedAfter: 'yesterday' })).toThrow(/invalid startedAfter/);
    expect(() => q({ limit: 0 })).toThrow(/invalid limit/);
    expect(() => q({ limit: 101 })).toThrow(/invalid limit/);
    expect(() => q({ nextToken: 'garbage' })).toThrow(/invalid nextToken/);
    const desc = queryPage(items, q({ limit: 1 })).nextToken!;
    expect(() => q({ nextToken: desc, order: 'asc' })).toThrow(/other order/);
    expect(() => parseMetadataQuery('a=%E0%A4%A')).toThrow(/invalid metadata/);
  });

  it('round-trips page cursors', () => {
    const c = { startedAtMs: 1234, sandboxId: 'abc', order: 'asc' as const };
    expect(decodePageCursor(encodePageCursor(c))).toEqual(c);
  });
});

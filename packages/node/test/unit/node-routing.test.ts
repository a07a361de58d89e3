import { describe, expect, it } from 'vitest';
import { decodePageToken, paginate } from '../../src/api/pagination.js';
import { newSandboxId } from '@agentenv/common';
import { isTransient, transitionFor, visibleState } from '../../src/orchestrator/states.js';
import { forwardHeaders, nodeOnlyEnvdPath, nodeOnlyEnvdRefusal, routeRequest } from '@agentenv/common';

describe('proxy routing', () => {
  const domains = ['aenv.test'];
  it('routes by E2B and AgentENV headers', () => {
    expect(
      routeRequest('/x?y=1', { 'e2b-sandbox-id': 'abc123', 'e2b-sandbox-port': '49983' }, domains),
    ).toEqual({
      sandboxId: 'abc123',
      port: 49983,
      path: '/x?y=1',
      native: false,
    });
    expect(
      routeRequest('/', { 'x-agentenv-sandbox-id': 'abc', 'x-agentenv-target-port': '8080' }, domains)?.port,
    ).toBe(8080);
    expect(
      routeRequest('/proxy/files', { 'e2b-sandbox-id': 'abc', 'e2b-sandbox-port': '1' }, domains)?.path,
    ).toBe('/files');
    // Routing headers that are wrong still go to the proxy, which answers 400.
    expect(routeRequest('/', { 'e2b-sandbox-id': 'abc', 'e2b-sandbox-port': '70000' }, domains)?.port).toBe(
      0,
    );
  });
  it('routes by {port}-{id}.{domain} hosts of configured domains only', () => {
    expect(routeRequest('/a', { host: '8080-abc123.aenv.test:8000' }, domains)).toMatchObject({
      sandboxId: 'abc123',
      port: 8080,
    });
    expect(routeRequest('/a', { host: '8080-abc123.other.test' }, domains)).toBeUndefined();
    expect(routeRequest('/a', { host: 'abc123.aenv.test' }, domains)).toBeUndefined();
    expect(routeRequest('/a', { host: '127.0.0.1:8000' }, domains)).toBeUndefined();
  });
  it('routes native /proxy/{id}/{port}/ paths', () => {
    expect(routeRequest('/proxy/abc/3000/api?q=1', {}, domains)).toEqual({
      sandboxId: 'abc',
      port: 3000,
      path: '/api?q=1',
      native: true,
    });
    expect(routeRequest('/proxy/abc/3000', {}, domains)?.path).toBe('/');
    expect(routeRequest('/sandboxes', {}, domains)).toBeUndefined();
  });
  /** A request as the server shows it: raw names as sent, the lower-cased map. */
  const req = (raw: string[]) => {
    const headers: Record<string, string> = {};
    for (let i = 0; i < raw.length; i += 2) headers[raw[i]!.toLowerCase()] ??= raw[i + 1]!;
    return { rawHeaders: raw, headers };
  };
  it('strips routing, hop-by-hop and API-key headers, keeping names as the client spelled them', () => {
    const h = forwardHeaders(
      req([
        'Host',
        'h',
        'E2B-Sandbox-Id',
        'a',
        'X-API-Key',
        'k',
        'Connection',
        'upgrade',
        'Upgrade',
        'websocket',
        'X-Access-Token',
        't',
        'Cookie',
        'a=1',
        'Cookie',
        'b=2',
      ]),
      { keepUpgrade: false },
    );
    expect(h).toEqual(['Host', 'h', 'X-Access-Token', 't', 'Cookie', 'a=1', 'Cookie', 'b=2']);
    expect(
      forwardHeaders(req(['connection', 'upgrade', 'upgrade', 'websocket']), { keepUpgrade: true }),
    ).toEqual(['connection', 'upgrade', 'upgrade', 'websocket']);
  });
  it('puts a masked Host in the client’s place, and an HTTP/2 :authority as Host, spelled Host', () => {
    expect(forwardHeaders(req(['host', 'x', 'x-a', '1']), { keepUpgrade: false })).toEqual([
      'Host',
      'x',
      'x-a',
      '1',
    ]);
    expect(
      forwardHeaders(req(['A', '1', 'Host', 'x', 'B', '2']), { keepUpgrade: false, host: 'localhost:80' }),
    ).toEqual(['A', '1', 'Host', 'localhost:80', 'B', '2']);
    const h2 = {
      rawHeaders: [':authority', 'x.test', ':path', '/', 'a', '1'],
      headers: { host: 'x.test', a: '1' },
    };
    expect(forwardHeaders(h2, { keepUpgrade: false })).toEqual(['a', '1', 'Host', 'x.test']);
    expect(forwardHeaders(h2, { keepUpgrade: false, host: 'm' })).toEqual(['a', '1', 'Host', 'm']);
  });
  it('knows envd’s node-only paths as envd reads them', () => {
    for (const p of ['/init', '/init?x', '/./init', '/a/../init', '/INIT', '/init/', '\\init'])
      expect(nodeOnlyEnvdPath(p)).toBe('/init');
    for (const p of ['/files', '/initx', '/x/init', '//init', '/%69nit', '/health'])
      expect(nodeOnlyEnvdPath(p)).toBeUndefined();
    const route = { sandboxId: 'a', port: 49983, path: '/init', native: false };
    expect(nodeOnlyEnvdRefusal(route, 49983)?.kind).toBe('forbidden');
    expect(nodeOnlyEnvdRefusal({ ...route, port: 8080 }, 49983)).toBeUndefined();
  });
});

describe('pagination', () => {
  it('pages newest-first lists with opaque tokens', () => {
    const items = [1, 2, 3, 4, 5];
    const a = paginate(items, 2, undefined);
    expect(a.page).toEqual([1, 2]);
    const b = paginate(items, 2, a.next);
    expect(b.page).toEqual([3, 4]);
    const c = paginate(items, 2, b.next);
    expect(c).toEqual({ page: [5] });
    expect(() => decodePageToken('garbage')).toThrow(/nextToken/);
  });
});

describe('sandbox states and ids', () => {
  it('allows operations only from their states', () => {
    expect(transitionFor('pause').from).toEqual(['running']);
    expect(transitionFor('kill').from).toEqual(['running', 'paused']);
    expect(isTransient('pausing')).toBe(true);
    expect(visibleState('pausing')).toBe('paused');
    expect(visibleState('forking')).toBe('running');
  });
  it('makes host-label-safe ids', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newSandboxId()));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]{20}$/);
  });
});

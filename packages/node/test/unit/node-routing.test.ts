import { describe, expect, it } from 'vitest';
import { decodePageToken, paginate } from '../../src/api/pagination.js';
import { newSandboxId } from '../../src/util/ids.js';
import { isTransient, transitionFor, visibleState } from '../../src/orchestrator/states.js';
import { forwardHeaders, routeRequest } from '@agentenv/common';

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
  it('strips routing, hop-by-hop and API-key headers', () => {
    const h = forwardHeaders(
      {
        'e2b-sandbox-id': 'a',
        'x-api-key': 'k',
        connection: 'upgrade',
        upgrade: 'websocket',
        'x-access-token': 't',
      },
      false,
    );
    expect(h).toEqual({ 'x-access-token': 't' });
    expect(forwardHeaders({ connection: 'upgrade', upgrade: 'websocket' }, true)).toEqual({
      connection: 'upgrade',
      upgrade: 'websocket',
    });
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

import { describe, expect, it } from 'vitest';
import { classify } from '../../src/routing/classify.js';
import { TemplateAffinity } from '../../src/routing/template-affinity.js';
import { rawRequestHeaders, requestHeaders } from '../../src/upstream/headers.js';

describe('control-plane routing', () => {
  it.each([
    ['GET', '/health', { kind: 'health' }],
    ['GET', '/metrics', { kind: 'metrics' }],
    ['GET', '/nodes', { kind: 'nodes' }],
    ['GET', '/nodes/n%201', { kind: 'node', nodeId: 'n 1' }],
    ['GET', '/events?sandboxID=x', { kind: 'events' }],
    ['POST', '/sandboxes', { kind: 'create', cold: false, v2: false }],
    ['POST', '/v2/sandboxes', { kind: 'create', cold: false, v2: true }],
    ['POST', '/sandboxes-cold', { kind: 'create', cold: true, v2: false }],
    ['GET', '/sandboxes', { kind: 'list', v2: false }],
    ['GET', '/v2/sandboxes?state=paused&limit=3', { kind: 'list', v2: true }],
    ['POST', '/sandboxes/abc123/fork', { kind: 'fork', sandboxId: 'abc123' }],
    ['POST', '/sandboxes/abc123/connect', { kind: 'resume', sandboxId: 'abc123' }],
    ['POST', '/v2/sandboxes/abc123/connect', { kind: 'resume', sandboxId: 'abc123' }],
    ['POST', '/sandboxes/abc123/resume', { kind: 'resume', sandboxId: 'abc123' }],
    ['GET', '/sandboxes/abc123/events', { kind: 'sandbox-events', sandboxId: 'abc123' }],
    ['GET', '/sandboxes/abc123', { kind: 'sandbox', sandboxId: 'abc123' }],
    ['DELETE', '/sandboxes/abc123', { kind: 'sandbox', sandboxId: 'abc123' }],
    ['POST', '/sandboxes/abc123/snapshots', { kind: 'snapshot', sandboxId: 'abc123' }],
    ['GET', '/sandboxes/abc123/snapshots', { kind: 'sandbox', sandboxId: 'abc123' }],
    ['GET', '/sandboxes/abc123/metrics?start=1', { kind: 'sandbox', sandboxId: 'abc123' }],
    ['PUT', '/sandboxes/abc123/network', { kind: 'sandbox', sandboxId: 'abc123' }],
    ['POST', '/v3/templates', { kind: 'template', register: true }],
    ['GET', '/templates/t1/files/abc', { kind: 'template', templateId: 't1', register: false }],
    ['PUT', '/templates/t1/files/abc', { kind: 'template', templateId: 't1', register: false }],
    ['POST', '/v2/templates/t1/builds/b1', { kind: 'template', templateId: 't1', register: false }],
    [
      'GET',
      '/templates/t1/builds/b1/status?logsOffset=2',
      { kind: 'template', templateId: 't1', register: false },
    ],
    ['GET', '/volumes', { kind: 'volumes' }],
    ['POST', '/volumes', { kind: 'any-node' }],
    ['GET', '/volumes/vol1', { kind: 'volume', probe: '/volumes/vol1' }],
    ['DELETE', '/volumes/a%2Fb', { kind: 'volume', probe: '/volumes/a%2Fb' }],
    [
      'PUT',
      '/volumecontent/vol1/file?path=/x',
      { kind: 'volume-content', probe: '/volumecontent/vol1/path?path=%2F' },
    ],
    ['GET', '/templates', { kind: 'any-node' }],
    // Template.exists: built templates and snapshots are in the shared repository, base everywhere.
    ['GET', '/templates/aliases/base', { kind: 'any-node' }],
    ['GET', '/snapshots?sandboxID=x', { kind: 'any-node' }],
    ['GET', '/snapshots/snap1', { kind: 'any-node' }],
    ['DELETE', '/templates/t1', { kind: 'any-node' }],
    // An id a node would refuse is still the node's to refuse (400), not a gateway 404.
    ['GET', '/sandboxes/UPPER', { kind: 'any-node' }],
  ])('%s %s', (method, url, want) => {
    expect(classify(method, url)).toEqual(want);
  });
});

describe('headers sent to a node', () => {
  it('drop hop-by-hop headers and say how the client came', () => {
    const h = requestHeaders(
      {
        host: 'gw:8080',
        connection: 'keep-alive',
        'keep-alive': '5',
        'x-api-key': 'k',
      },
      { upgrade: false, tls: true },
    );
    expect(h).toEqual({
      host: 'gw:8080',
      'x-api-key': 'k',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'gw:8080',
    });
  });

  it('keep the upgrade of a WebSocket and add routing headers', () => {
    const h = requestHeaders(
      { host: '3000-abc.example.test', connection: 'Upgrade', upgrade: 'websocket' },
      { upgrade: true, tls: false, extra: { 'e2b-sandbox-id': 'abc' } },
    );
    expect(h).toMatchObject({ connection: 'Upgrade', upgrade: 'websocket', 'e2b-sandbox-id': 'abc' });
  });

  it('keep the names as the client spelled them when streamed through to a sandbox', () => {
    const h = rawRequestHeaders(
      {
        rawHeaders: ['Host', '8080-abc.example.test', 'Connection', 'keep-alive', 'X-Mixed', '1'],
        headers: { host: '8080-abc.example.test', connection: 'keep-alive', 'x-mixed': '1' },
      },
      { upgrade: false, tls: false, extra: { 'e2b-sandbox-id': 'abc' } },
    );
    expect(h).toEqual([
      'Host',
      '8080-abc.example.test',
      'X-Mixed',
      '1',
      'X-Forwarded-Proto',
      'http',
      'X-Forwarded-Host',
      '8080-abc.example.test',
      'e2b-sandbox-id',
      'abc',
    ]);
  });
});

describe('template build affinity', () => {
  it('remembers the registering node until the TTL', () => {
    let now = 0;
    const a = new TemplateAffinity(1000, () => now);
    a.remember('t1', 'n1');
    now = 999;
    expect(a.nodeOf('t1')).toBe('n1');
    now = 1000;
    expect(a.nodeOf('t1')).toBeUndefined();
  });
});

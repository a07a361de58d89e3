/**
 * Every ✗ row of docs/compatibility.md: the call fails with E2B's error shape ({code, message}),
 * 501, and a message that names the feature and says AgentENV does not support it.
 */
import { describe, expect, it } from 'vitest';
import { useFakeApp } from '@agentenv/test-support/fakes';

const fake = useFakeApp({ maxSandboxes: 2 });

const UNSUPPORTED = /^(.+) is not supported by AgentENV: .+/;

async function expectUnsupported(method: string, url: string, body: unknown, feature: string) {
  const r = await fake.call(method, url, body);
  expect(r.status).toBe(501);
  expect(Object.keys(r.json).sort()).toEqual(['code', 'message']);
  expect(r.json.code).toBe(501);
  expect(r.json.message).toMatch(UNSUPPORTED);
  expect(r.json.message).toContain(feature);
}

describe('E2B features AgentENV does not have', () => {
  it('Secret.*: every secrets route', async () => {
    for (const [method, url] of [
      ['POST', '/secrets'],
      ['GET', '/secrets'],
      ['GET', '/secrets/openai-key'],
      ['POST', '/secrets/openai-key'],
      ['DELETE', '/secrets/openai-key'],
    ] as const) {
      await expectUnsupported(
        method,
        url,
        method === 'POST' ? { name: 'openai-key', value: 'x' } : undefined,
        'secrets',
      );
    }
  });

  it('create options: iam tokens, mcp, the egress proxy, network rules, httpsPorts', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ iam: { tokens: { aws: { audience: 'sts.amazonaws.com', tokenType: 'JWT-SVID' } } } }, 'iam'],
      [{ mcp: { github: {} } }, 'mcp'],
      [{ network: { egressProxy: { address: 'proxy.example.com:1080' } } }, 'network.egressProxy'],
      [{ network: { rules: { 'api.example.com': [{ headers: { a: 'b' } }] } } }, 'network.rules'],
      [{ network: { httpsPorts: [3000] } }, 'network.httpsPorts'],
    ];
    for (const [body, feature] of cases) {
      await expectUnsupported('POST', '/v2/sandboxes', { templateID: 'base', ...body }, feature);
      await expectUnsupported('POST', '/sandboxes', body, feature);
    }
    expect(fake.node.slots.used).toBe(0);
  });

  it('network updates: the egress proxy and network rules', async () => {
    const id = (await fake.call('POST', '/sandboxes', {})).json.sandboxID as string;
    const url = `/sandboxes/${id}/network`;
    await expectUnsupported(
      'PUT',
      url,
      { egressProxy: { address: 'proxy.example.com:1080' } },
      'egressProxy',
    );
    await expectUnsupported('PUT', url, { rules: {} }, 'rules');
    await fake.call('DELETE', `/sandboxes/${id}`);
  });

  it('template builds from a cloud registry (fromAWSRegistry, fromGCPRegistry)', async () => {
    for (const type of ['aws', 'gcp']) {
      const body = { fromImage: 'example.com/app:1', fromImageRegistry: { type } };
      await expectUnsupported(
        'POST',
        '/v2/templates/t1/builds/b1',
        body,
        `fromImageRegistry of type '${type}'`,
      );
    }
  });

  it('domain names in allowOut are refused with a message that says so (400, as a bad value)', async () => {
    const r = await fake.call('POST', '/sandboxes', { network: { allowOut: ['example.com'] } });
    expect(r.status).toBe(400);
    expect(r.json.message).toMatch(/domain entries are not supported/);
  });
});

import { describe, expect, it } from 'vitest';
import { useFakeApp } from '@agentenv/test-support/fakes';
import type { SandboxRecord } from '../../src/orchestrator/index.js';

const fake = useFakeApp();

/** The settings a sandbox was created with, as its record keeps them. */
const settingsOf = (r: SandboxRecord) => ({
  metadata: r.metadata,
  envVars: r.envVars,
  autoPause: r.autoPause,
  autoPauseMemory: r.autoPauseMemory,
  autoResume: r.autoResume,
  secure: r.secure,
  egress: r.egress,
  allowPublicTraffic: r.allowPublicTraffic,
  maskRequestHost: r.maskRequestHost,
});

describe("a fork child's settings, on its parent's node and on another one", () => {
  it('GET /sandboxes/{id}/fork is a create body that gives a child exactly what a local fork child gets', async () => {
    const { call, node } = fake;
    const parent = await call('POST', '/sandboxes', {
      templateID: 'base',
      timeout: 600,
      metadata: { team: 'red' },
      envVars: { SECRET_MODE: 'on' },
      autoPause: true,
      autoPauseMemory: true,
      autoResume: { enabled: true },
      secure: true,
      allow_internet_access: false,
      network: {
        allowOut: ['10.9.0.0/16'],
        denyOut: ['10.9.1.0/24'],
        allowPublicTraffic: false,
        maskRequestHost: 'localhost:${PORT}',
      },
    });
    expect(parent.status).toBe(201);
    const id = parent.json.sandboxID as string;

    const forked = await call('POST', `/sandboxes/${id}/fork`, { count: 1 });
    expect(forked.status).toBe(201);
    const local = node.orchestrator.get(forked.json[0].sandbox.sandboxID);

    const body = await call('GET', `/sandboxes/${id}/fork`);
    expect(body.status).toBe(200);
    expect(body.json).toMatchObject({
      allow_internet_access: false,
      network: { allowOut: ['10.9.0.0/16'], denyOut: ['10.9.1.0/24'], allowPublicTraffic: false },
      autoResume: { enabled: true },
      secure: true,
    });
    expect(body.json.timeout).toBeGreaterThan(590);
    expect(body.json.timeout).toBeLessThanOrEqual(600);
    const elsewhere = await call('POST', '/sandboxes', { ...body.json, templateID: 'base' });
    expect(elsewhere.status).toBe(201);
    const spilled = node.orchestrator.get(elsewhere.json.sandboxID);

    expect(settingsOf(spilled)).toEqual(settingsOf(local));
    expect(settingsOf(local)).toEqual(settingsOf(node.orchestrator.get(id)));
    expect(spilled.trafficAccessToken).toBeDefined();
    expect(spilled.envdAccessToken).toBeDefined();
    expect(Math.abs(Date.parse(spilled.endAt) - Date.parse(local.endAt))).toBeLessThan(2000);
  });

  it('keeps a filesystem-only auto-pause and a kill on timeout', async () => {
    const { call, node } = fake;
    for (const lifecycle of [{ autoPause: true, autoPauseMemory: false }, { autoPause: false }]) {
      const parent = await call('POST', '/sandboxes', { templateID: 'base', ...lifecycle });
      expect(parent.status).toBe(201);
      const body = await call('GET', `/sandboxes/${parent.json.sandboxID}/fork`);
      const child = await call('POST', '/sandboxes', { ...body.json, templateID: 'base' });
      expect(child.status).toBe(201);
      expect(settingsOf(node.orchestrator.get(child.json.sandboxID))).toEqual(
        settingsOf(node.orchestrator.get(parent.json.sandboxID)),
      );
    }
  });

  it('answers 404 for an unknown sandbox', async () => {
    expect((await fake.call('GET', '/sandboxes/nope/fork')).status).toBe(404);
  });
});

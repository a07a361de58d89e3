import { describe, expect, it } from 'vitest';
import { captureKey } from '@agentenv/protocol/scheduler';
import { createInput, heartbeat, schedulerParts } from './helpers.js';

const create = createInput;

/** 200 nodes: enough that a placement looks at a sample of them. */
async function big(over: (i: number) => Parameters<typeof heartbeat>[1] = () => ({})) {
  const { membership, placements } = schedulerParts();
  for (let i = 0; i < 200; i++) await membership.heartbeat(heartbeat(`n${i}`, over(i)));
  return placements;
}

describe('placement in a big cluster', () => {
  it('still finds the one node holding the capture', async () => {
    const placements = await big((i) => (i === 137 ? { cacheKeys: [captureKey.template('rare')] } : {}));
    for (let i = 0; i < 4; i++)
      await expect(placements.schedule(create({ templateId: 'rare' }))).resolves.toMatchObject({
        nodeId: 'n137',
        localityHit: true,
      });
  });

  it('still finds the one node with room, and names the reasons when none has', async () => {
    const full = { ...heartbeat('x').load, runningCount: 10 };
    const placements = await big((i) => (i === 42 ? {} : { load: full }));
    for (let i = 0; i < 4; i++)
      await expect(placements.schedule(create())).resolves.toMatchObject({ nodeId: 'n42' });
    await expect(placements.schedule(create())).rejects.toMatchObject({
      kind: 'capacity',
      message: expect.stringMatching(/at its maximum of 10 sandboxes.*and 195 more/),
    });
  });
});

import { describe, expect, it } from 'vitest';
import { toSandboxEvent } from '../../src/shared/events.js';

describe('lifecycle events in one shape', () => {
  it("reads a node's event as it is", () => {
    expect(
      toSandboxEvent({
        type: 'created',
        sandboxID: 'abc',
        nodeID: 'n1',
        reason: '',
        details: { template_id: 'base' },
        timestamp: '2025-01-01T00:00:00.000Z',
      }),
    ).toEqual({
      type: 'created',
      sandboxID: 'abc',
      nodeID: 'n1',
      details: { template_id: 'base' },
      timestamp: '2025-01-01T00:00:00.000Z',
    });
  });

  it("reads the cluster scheduler's spelling, keeping string details only", () => {
    expect(
      toSandboxEvent({
        eventId: '7',
        sandboxId: 'abc',
        nodeId: 'n2',
        type: 'lost',
        reason: 'node failure',
        time: '2025-01-01T00:00:01.000Z',
        details: { child_count: '2', nested: { no: 1 } },
      }),
    ).toEqual({
      type: 'lost',
      sandboxID: 'abc',
      nodeID: 'n2',
      reason: 'node failure',
      details: { child_count: '2' },
      timestamp: '2025-01-01T00:00:01.000Z',
    });
  });

  it('names a typeless event unknown rather than failing', () => {
    expect(toSandboxEvent({}).type).toBe('unknown');
  });
});

import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { NodeStatus } from '@agentenv/protocol/scheduler';
import type { SchedulerClient } from '@agentenv/scheduler';
import { eventually } from '@agentenv/test-support';
import { ClusterAgent } from '../../src/cluster/agent.js';
import { SandboxEventLog } from '../../src/cluster/sandbox-events.js';

function agentWithCountingClient(
  answer: NodeStatus = NodeStatus.READY,
  answered = async () => {},
  fenced: string[] = [],
) {
  const sent: string[][] = [];
  const stopped: string[] = [];
  let stopping = Promise.resolve();
  const statuses: (NodeStatus | undefined)[] = [];
  let keys = ['template/base'];
  const client = {
    heartbeat: async (req: { cacheKeys?: string[]; status?: NodeStatus }) => {
      sent.push([...(req.cacheKeys ?? [])]);
      statuses.push(req.status);
      await answered();
      return { intervalMs: 60_000, status: answer, fencedSandboxIds: fenced };
    },
    reportSandboxEvent: async () => ({}),
    unregisterNode: async () => ({}),
  } as unknown as SchedulerClient;
  const events = new SandboxEventLog('n1');
  const stageListeners = new Set<(stage: string) => void>();
  const agent = new ClusterAgent({
    client,
    identity: { nodeId: 'n1', clusterId: 'c', advertiseUrl: 'http://127.0.0.1:1', version: '0' },
    limits: { maxSandboxes: 10, maxConcurrentStarts: 2 },
    records: () => [],
    host: async () => ({ cpuCount: 2, memoryTotalMib: 1024, memoryAvailableMib: 512, loadAvg1m: 0 }),
    cacheKeys: async () => keys,
    events,
    stages: (l) => {
      stageListeners.add(l);
      return () => stageListeners.delete(l);
    },
    fence: async (id) => {
      stopped.push(id);
      await stopping;
    },
    logger: pino({ level: 'silent' }),
    intervalMs: 60_000,
  });
  const stageDone = (stage: string) => stageListeners.forEach((l) => l(stage));
  return {
    agent,
    events,
    sent,
    statuses,
    stageDone,
    stageListeners,
    stopped,
    setKeys: (k: string[]) => (keys = k),
    holdStops: (p: Promise<void>) => (stopping = p),
  };
}

describe('cluster agent', () => {
  it('stops each sandbox the scheduler fenced, once while it is being stopped', async () => {
    const fenced = ['lost-1', 'lost-2'];
    const { agent, events, sent, stopped, holdStops } = agentWithCountingClient(
      NodeStatus.READY,
      async () => {},
      fenced,
    );
    let release = () => {};
    holdStops(new Promise<void>((r) => (release = r)));
    // A snapshot makes the agent heartbeat at once.
    const beatNow = () =>
      events.observer.event({ type: 'snapshot', sandboxId: 'sb1', reason: 'request', at: Date.now() });
    agent.start();
    try {
      await eventually(() => expect(stopped).toEqual(fenced));
      // The next heartbeat names them again while they are being stopped: no second stop.
      beatNow();
      await eventually(() => expect(sent.length).toBeGreaterThanOrEqual(2));
      expect(stopped).toEqual(fenced);
      release();
      await eventually(() => {
        beatNow();
        // Once stopped, a sandbox the roster still listed is stopped again when named again.
        expect(stopped.slice(0, 4)).toEqual([...fenced, ...fenced]);
      });
    } finally {
      release();
      await agent.stop();
    }
  });

  it('heartbeats at once after a snapshot, with the new cache key, not one interval later', async () => {
    const { agent, events, sent, setKeys } = agentWithCountingClient();
    agent.start();
    try {
      await eventually(() => expect(sent).toHaveLength(1));
      setKeys(['template/base', 'snapshot/s1']);
      events.observer.event({ type: 'snapshot', sandboxId: 'sb1', reason: 'request', at: Date.now() });
      await eventually(() => expect(sent.at(-1)).toContain('snapshot/s1'));
      expect(sent.length).toBeGreaterThanOrEqual(2);
    } finally {
      await agent.stop();
    }
  });

  it('heartbeats at once when a pause is stored in the shared repository, and for no other stage', async () => {
    const { agent, sent, stageDone, stageListeners } = agentWithCountingClient();
    agent.start();
    try {
      await eventually(() => expect(sent).toHaveLength(1));
      stageDone('create');
      stageDone('pause-upload');
      await eventually(() => expect(sent).toHaveLength(2));
    } finally {
      await agent.stop();
    }
    expect(stageListeners.size).toBe(0);
    expect(sent).toHaveLength(3); // and the last one of stop()
  });

  it('says it is draining in every heartbeat once the scheduler answered that it drained it', async () => {
    const { agent, events, statuses } = agentWithCountingClient(NodeStatus.DRAINING);
    agent.start();
    try {
      await eventually(() => expect(statuses).toHaveLength(1));
      expect(statuses[0]).toBe(NodeStatus.READY);
      // A snapshot sends the next heartbeat at once.
      events.observer.event({ type: 'snapshot', sandboxId: 'sb1', reason: 'request', at: Date.now() });
      await eventually(() => expect(statuses.length).toBeGreaterThanOrEqual(2));
      expect(statuses.slice(1).every((s) => s === NodeStatus.DRAINING)).toBe(true);
    } finally {
      await agent.stop();
    }
  });

  it('ends with a heartbeat of the final state, not the one under way when it stopped', async () => {
    let release = () => {};
    const slow = new Promise<void>((r) => (release = r));
    const { agent, sent, setKeys } = agentWithCountingClient(NodeStatus.READY, () => slow);
    agent.start();
    await eventually(() => expect(sent).toHaveLength(1));
    // The shutdown changed what the node holds while that heartbeat was still unanswered.
    setKeys(['template/base', 'snapshot/final']);
    const stopped = agent.stop();
    // (stop() is waiting on that heartbeat once the events, none here, are flushed.)
    await new Promise((r) => setImmediate(r));
    release();
    await stopped;
    expect(sent).toHaveLength(2);
    expect(sent[1]).toContain('snapshot/final');
  });
});

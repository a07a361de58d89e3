import { NodeStatus, SandboxState, startCacheKeys } from '@agentenv/protocol/scheduler';
import { describe, expect, it } from 'vitest';
import { CacheKeys } from '../../src/cluster/cache-keys.js';
import { heartbeatRequest, type RosterSource } from '../../src/cluster/report.js';
import { SandboxEventLog } from '../../src/cluster/sandbox-events.js';
import { observeAll } from '../../src/orchestrator/index.js';

const rec = (sandboxId: string, state: string, over: Partial<RosterSource> = {}): RosterSource => ({
  sandboxId,
  state,
  templateId: 'base',
  cpuCount: 2,
  memoryMB: 1024,
  ...over,
});

describe('heartbeat report', () => {
  it('counts allocation over sandboxes that hold resources, and lists every sandbox', () => {
    const hb = heartbeatRequest({
      identity: {
        nodeId: 'n1',
        clusterId: 'c',
        advertiseUrl: 'http://10.0.0.1:8000',
        version: '1',
        bootId: 'b',
      },
      draining: false,
      records: [
        rec('a', 'running'),
        rec('b', 'creating'),
        rec('c', 'paused', { pauseId: 'p' }),
        rec('d', 'resuming'),
        rec('e', 'paused', { pauseId: 'p0', uploadPending: true }),
      ],
      host: { cpuCount: 4, memoryTotalMib: 8000, memoryAvailableMib: 6000, loadAvg1m: 0.5 },
      limits: { maxSandboxes: 50, maxConcurrentStarts: 8 },
      cacheKeys: ['k'],
    });
    expect(hb.status).toBe(NodeStatus.READY);
    expect(hb.load).toEqual({
      allocatedCpu: 6,
      allocatedMemoryMib: 3072,
      memoryUsedMib: 2000,
      memoryFreeMib: 6000,
      startsInFlight: 2,
      runningCount: 1,
      pausedCount: 2,
      cpuLoad1m: 0.5,
    });
    expect(hb.capacity).toEqual({
      cpuCount: 4,
      memoryTotalMib: 8000,
      maxSandboxes: 50,
      maxConcurrentStarts: 8,
    });
    // A pause only this node holds says so: nobody else may resume the sandbox from p0.
    expect(hb.sandboxes?.map((s) => [s.sandboxId, s.state, s.pauseId, s.pauseLocalOnly])).toEqual([
      ['a', SandboxState.RUNNING, '', false],
      ['b', SandboxState.CREATING, '', false],
      ['c', SandboxState.PAUSED, 'p', false],
      ['d', SandboxState.RESUMING, '', false],
      ['e', SandboxState.PAUSED, 'p0', true],
    ]);
  });
});

describe('cache keys', () => {
  it('names each capture by kind, id and every name, as placement looks for them, reading each record once', async () => {
    const reads: string[] = [];
    const entries = [{ id: 'snap-1' }, { id: 'pause-1' }, { id: 'tpl-rec' }];
    const records: Record<string, { labels: Record<string, string>; meta: Record<string, unknown> }> = {
      'snap-1': { labels: { kind: 'snapshot' }, meta: { info: { names: ['golden'] } } },
      'pause-1': { labels: { kind: 'pause' }, meta: {} },
      'tpl-rec': {
        labels: { kind: 'template', templateId: 'tid' },
        meta: { template: { names: ['app', 'app:v1'] } },
      },
    };
    const keys = new CacheKeys(
      { stats: () => ({ entries }) },
      {
        getRecord: async (id) => {
          reads.push(id);
          return records[id]!;
        },
      },
    );
    const all = await keys.current();
    expect(all).toEqual([
      'snapshot/snap-1',
      'snapshot/golden',
      'pause/pause-1',
      'template/tid',
      'template/app',
      'template/app:v1',
    ]);
    // What placement derives from a start's ids is what the node advertises.
    expect(startCacheKeys({ templateId: 'snap-1' }).some((k) => all.includes(k))).toBe(true);
    expect(startCacheKeys({ templateId: 'golden' }).some((k) => all.includes(k))).toBe(true);
    expect(startCacheKeys({ templateId: 'app:v1' }).some((k) => all.includes(k))).toBe(true);
    expect(startCacheKeys({ pauseId: 'pause-1' }).some((k) => all.includes(k))).toBe(true);
    expect(startCacheKeys({ templateId: 'base' }).some((k) => all.includes(k))).toBe(false);
    entries.splice(1);
    expect(await keys.current()).toEqual(['snapshot/snap-1', 'snapshot/golden']);
    expect(reads).toEqual(['snap-1', 'pause-1', 'tpl-rec']);
  });

  it('a record that cannot be read is advertised under no key and read again later', async () => {
    let fail = true;
    const keys = new CacheKeys(
      { stats: () => ({ entries: [{ id: 'r' }] }) },
      {
        getRecord: async () => {
          if (fail) throw new Error('repository down');
          return { labels: { kind: 'template', templateId: 't' }, meta: {} };
        },
      },
    );
    expect(await keys.current()).toEqual([]);
    fail = false;
    expect(await keys.current()).toEqual(['template/t']);
  });
});

describe('sandbox event log', () => {
  it('keeps events per sandbox, oldest first, bounded, and tells listeners', () => {
    const log = new SandboxEventLog('n1');
    const seen: string[] = [];
    const off = log.onEvent((e) => seen.push(e.type));
    log.record({ type: 'created', sandboxId: 's', reason: 'request', at: 0 });
    log.record({ type: 'paused', sandboxId: 's', reason: 'timeout', at: 0 });
    off();
    for (let i = 0; i < 150; i++) log.record({ type: 'resumed', sandboxId: 's', reason: 'request', at: 0 });
    expect(seen).toEqual(['created', 'paused']);
    expect(log.list('s')).toHaveLength(100);
    expect(log.list('s')![0]).toEqual({
      type: 'resumed',
      sandboxID: 's',
      nodeID: 'n1',
      reason: 'request',
      details: {},
      timestamp: '1970-01-01T00:00:00.000Z',
    });
    expect(log.list('other')).toBeUndefined();
  });

  it('joins the metrics observer and the log into one orchestrator observer', () => {
    const log = new SandboxEventLog('n1');
    const calls: string[] = [];
    const o = observeAll(
      {
        stage: (n) => calls.push(`stage ${n}`),
        failed: (n) => calls.push(`failed ${n}`),
        event: (e) => calls.push(`event ${e.type}`),
      },
      log.observer,
    );
    o.stage('create', 1);
    o.failed('pause');
    o.event({ type: 'killed', sandboxId: 'x', reason: 'request', at: 1000, details: { a: 'b' } });
    expect(calls).toEqual(['stage create', 'failed pause', 'event killed']);
    expect(log.list('x')).toEqual([
      expect.objectContaining({ type: 'killed', details: { a: 'b' }, timestamp: '1970-01-01T00:00:01.000Z' }),
    ]);
  });
});

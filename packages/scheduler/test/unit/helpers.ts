import type { Clock } from '../../src/clock.js';
import { EventLog } from '../../src/events.js';
import { FailureDetector } from '../../src/membership/failures.js';
import { Membership, type HeartbeatInput } from '../../src/membership/membership.js';
import { Reservations, type PlacementObserver, type ScheduleInput } from '../../src/schedule/reservations.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { NodeRecord, RosterEntry } from '../../src/model.js';
import type { PlacementPolicy } from '../../src/schedule/scoring/policy.js';
import { DEFAULT_SETTINGS, type SchedulerSettings } from '../../src/settings.js';

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  constructor(public t = 1_000_000) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

type SettingsOverride = Partial<Omit<SchedulerSettings, 'policy'>> & { policy?: Partial<PlacementPolicy> };

export function settings(over: SettingsOverride = {}): SchedulerSettings {
  return { ...DEFAULT_SETTINGS, ...over, policy: { ...DEFAULT_SETTINGS.policy, ...over.policy } };
}

/** A heartbeat of an idle node with 4 CPUs, 16 GiB and room for 10 sandboxes. */
export function heartbeat(nodeId: string, over: Partial<HeartbeatInput> = {}): HeartbeatInput {
  return {
    nodeId,
    advertiseUrl: `http://127.0.0.1:${8000 + nodeId.length}`,
    version: '0.1.0',
    clusterId: 'default',
    bootId: `boot-${nodeId}`,
    status: 'ready',
    capacity: { cpuCount: 4, memoryTotalMib: 16384, maxSandboxes: 10, maxConcurrentStarts: 4 },
    load: {
      allocatedCpu: 0,
      allocatedMemoryMib: 0,
      memoryUsedMib: 1024,
      memoryFreeMib: 15360,
      startsInFlight: 0,
      runningCount: 0,
      pausedCount: 0,
      cpuLoad1m: 0,
    },
    roster: [],
    cacheKeys: [],
    chunkKeys: [],
    ...over,
  };
}

export function nodeRecord(nodeId: string, over: Partial<NodeRecord> = {}): NodeRecord {
  const hb = heartbeat(nodeId);
  return {
    nodeId,
    advertiseUrl: hb.advertiseUrl,
    version: hb.version,
    clusterId: hb.clusterId,
    bootId: hb.bootId,
    reported: 'ready',
    capacity: hb.capacity,
    load: hb.load,
    cacheKeys: [],
    chunkDigest: '',
    lastHeartbeatMs: 0,
    ...over,
  };
}

export const running = (sandboxId: string, over: Partial<RosterEntry> = {}): RosterEntry => ({
  sandboxId,
  state: 'running',
  templateId: 'base',
  cpuCount: 2,
  memoryMib: 1024,
  ...over,
});

/** A deterministic sequence for best-of-K sampling. */
export function sequence(values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length]!;
}

/** A scheduler's parts over one memory store and a manual clock. */
export function schedulerParts(s = settings(), observer?: PlacementObserver) {
  const clock = new ManualClock();
  const store = new MemoryStore(clock);
  const membership = new Membership(store, clock, s);
  const events = new EventLog(store, clock);
  const failures = new FailureDetector(store, clock, s, membership, events);
  const placements = new Reservations(store, clock, s, membership, observer);
  return { clock, store, membership, events, failures, placements };
}

/** A Schedule call for one new 1-CPU, 512 MiB sandbox, with `over` on top. */
export const createInput = (over: Partial<ScheduleInput> = {}): ScheduleInput => ({
  kind: 'create',
  cacheKeys: [],
  excludeNodeIds: [],
  count: 1,
  resources: { cpuCount: 1, memoryMib: 512 },
  ...over,
});

import { toSandboxEvent } from '../shared/events.js';
import type { SandboxEvent, StageSample } from '../shared/types.js';
import { WINDOW_MS } from '../shared/window.js';
import { api } from './api.js';
import { normalizeNode, type NodeView } from './nodes.js';
import { Store } from './store.js';
import { LiveStream, type StreamStatus } from './stream.js';

/** Points kept per node for its sparkline (one a tick, ~2 s: about four minutes). */
const NODE_HISTORY = 120;
const RECENT_EVENTS = 200;

export interface NodeLive {
  view: NodeView;
  /** [unix s, cpu load per core %, measured memory %] */
  history: [number, number, number][];
}

/**
 * The app's live state, fed by one event stream (lifecycle events, finished operations, node
 * status) after an initial load. Views read it; tables refetch their page when `changes` moves.
 */
export const live = {
  status: new Store<{ state: StreamStatus; detail?: string }>({ state: 'connecting' }),
  samples: new Store<StageSample[]>([]),
  nodes: new Store<Map<string, NodeLive>>(new Map()),
  events: new Store<SandboxEvent[]>([]),
  /** Bumped on every sandbox event: what a table listens to instead of polling. */
  changes: new Store<number>(0),
};

let stream: LiveStream | undefined;

export function addNodes(raw: Record<string, unknown>[], at = Date.now() / 1000): void {
  live.nodes.update((prev) => {
    const next = new Map(prev);
    for (const r of raw) {
      const view = normalizeNode(r);
      if (!view.nodeID) continue;
      const history = [...(prev.get(view.nodeID)?.history ?? [])];
      const cpu = view.cpuCount ? (100 * view.cpuLoad1m) / view.cpuCount : 0;
      const mem = view.memoryTotalMiB ? (100 * view.memoryUsedMiB) / view.memoryTotalMiB : 0;
      history.push([at, cpu, mem]);
      if (history.length > NODE_HISTORY) history.shift();
      next.set(view.nodeID, { view, history });
    }
    return next;
  });
}

function addSample(s: StageSample): void {
  const since = Date.now() - WINDOW_MS;
  live.samples.update((all) => [...all.filter((x) => x.at >= since), s]);
}

function addEvent(e: SandboxEvent): void {
  live.events.update((all) => [e, ...all].slice(0, RECENT_EVENTS));
  live.changes.update((n) => n + 1);
}

/** Loads what the stream does not replay, then follows the stream. */
export async function startLive(): Promise<void> {
  stopLive();
  const [summary, nodes] = await Promise.all([api.summary(), api.nodes()]);
  live.samples.set(summary.samples);
  addNodes(nodes);
  stream = new LiveStream(
    '/dashboard/api/stream',
    (event, data) => {
      if (!data || typeof data !== 'object') return;
      if (event === 'sandbox') addEvent(toSandboxEvent(data as Record<string, unknown>));
      else if (event === 'stage') addSample(data as StageSample);
      else if (event === 'node') addNodes([data as Record<string, unknown>]);
      // A new connection may have missed events: tables look again.
      else if (event === 'hello') live.changes.update((n) => n + 1);
    },
    (state, detail) => live.status.set({ state, ...(detail ? { detail } : {}) }),
  ).start();
}

export function stopLive(): void {
  stream?.close();
  stream = undefined;
  live.samples.set([]);
  live.nodes.set(new Map());
  live.events.set([]);
}

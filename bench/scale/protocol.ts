/** Messages between the bench (parent) and its load processes (children), over fork's IPC. */
import type { SimShape } from './sim-node.js';

/** `schedule`: Schedule calls only; `full`: each placement also assigned and started on its node. */
export type Flow = 'schedule' | 'full';

export interface LoadInit {
  type: 'init';
  url: string;
  apiKey: string;
  nodes: number;
  procs: number;
  proc: number;
  intervalMs: number;
  shape: SimShape;
}

export interface PhaseStart {
  type: 'phase';
  clients: number;
  ms: number;
  flow: Flow;
}

/** Sandboxes started on nodes: [nodeIndex, sandboxId, templateId]. */
export interface Started {
  type: 'started';
  items: [number, string, string][];
}

export type ToLoad = LoadInit | PhaseStart | Started | { type: 'stop' };

export interface PhaseResult {
  type: 'result';
  placements: number;
  errors: number;
  firstError?: string;
  latenciesMs: number[];
  heartbeats: number;
  heartbeatErrors: number;
  heartbeatLatenciesMs: number[];
  cpuMs: number;
}

export type FromLoad = { type: 'joined' } | PhaseResult | Started;

export const owner = (nodeIndex: number, procs: number) => nodeIndex % procs;
export const nodeName = (nodeIndex: number) => `sim-${nodeIndex}`;
export const nodeIndexOf = (nodeId: string) => Number(nodeId.slice(4));

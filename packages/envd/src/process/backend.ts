import type { ProcessEnd } from './events.js';

export interface SpawnSpec {
  cmd: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  /** Omitted for root, so root keeps its groups. */
  uid?: number;
  gid?: number;
  /** Keep stdin open for SendInput; otherwise the child reads /dev/null. */
  stdin: boolean;
  pty?: { cols: number; rows: number };
}

export interface BackendEvents {
  onData(stream: 'stdout' | 'stderr' | 'pty', data: Uint8Array): void;
  onEnd(end: ProcessEnd): void;
}

/** A spawned child, behind one interface whether it has pipes or a terminal. */
export interface ProcessBackend {
  readonly pid: number;
  readonly isPty: boolean;
  writeInput(data: Uint8Array): void;
  closeInput(): void;
  resize(cols: number, rows: number): void;
  signal(sig: 'SIGTERM' | 'SIGKILL'): void;
  pauseOutput(): void;
  resumeOutput(): void;
}

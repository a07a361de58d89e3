import type { ProcessOptions, ProcessResult } from '../subprocess.js';

/** The options of runProcess that travel to the spawner (the rest cannot: a signal, callbacks, fds). */
const WIRE_OPTIONS = [
  'input',
  'env',
  'timeoutMs',
  'timeoutSignal',
  'maxOutputBytes',
  'untilStdoutEnds',
] as const;
export type WireOptions = Pick<ProcessOptions, (typeof WIRE_OPTIONS)[number]>;

/** The wire options set in `o`, and nothing else: what the client sends and the spawner runs with. */
export function wireOptions(o: WireOptions): WireOptions {
  const out: Record<string, unknown> = {};
  for (const k of WIRE_OPTIONS) if (o[k] !== undefined) out[k] = o[k];
  return out as WireOptions;
}

/**
 * The process spawner's wire format: one JSON object per line, requests on its stdin and
 * replies on its stdout, matched by `id`. A run's `env`, when set, is the whole environment;
 * without it the spawner's own (the node's at its start); secrets are taken out of either.
 */
export interface RunRequest extends WireOptions {
  readonly id: number;
  readonly file: string;
  readonly args: readonly string[];
}

/** SIGTERM to the run `id` (an aborted signal); its reply still follows. */
export interface CancelRequest {
  readonly id: number;
  readonly cancel: true;
}

export type SpawnerRequest = RunRequest | CancelRequest;

export type SpawnerReply =
  | { readonly id: number; readonly result: ProcessResult }
  /** The program could not be started; `code` is the errno name (ENOENT, EACCES, …). */
  | { readonly id: number; readonly error: { readonly message: string; readonly code?: string } };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const optional = (v: unknown, type: 'string' | 'number') => v === undefined || typeof v === type;

/** A request line, or a message saying why it is not one. */
export function parseRequest(line: string): SpawnerRequest | string {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return 'not JSON';
  }
  if (!isObject(v) || !Number.isSafeInteger(v.id)) return 'no numeric id';
  if (v.cancel === true) return { id: v.id as number, cancel: true };
  const args = v.args;
  if (typeof v.file !== 'string' || !Array.isArray(args) || !args.every((a) => typeof a === 'string'))
    return 'a run needs a file and string args';
  if (
    !optional(v.input, 'string') ||
    !optional(v.timeoutMs, 'number') ||
    !optional(v.maxOutputBytes, 'number')
  )
    return 'input must be a string, timeoutMs and maxOutputBytes numbers';
  if (
    v.timeoutSignal !== undefined &&
    (typeof v.timeoutSignal !== 'string' || !/^SIG[A-Z0-9]+$/.test(v.timeoutSignal))
  )
    return 'timeoutSignal must be a signal name';
  if (v.untilStdoutEnds !== undefined && typeof v.untilStdoutEnds !== 'boolean')
    return 'untilStdoutEnds must be a boolean';
  if (v.env !== undefined && (!isObject(v.env) || !Object.values(v.env).every((e) => optional(e, 'string'))))
    return 'env must map names to strings';
  return v as unknown as RunRequest;
}

/** A reply line, or undefined for anything else (the client ignores it). */
export function parseReply(line: string): SpawnerReply | undefined {
  try {
    const v: unknown = JSON.parse(line);
    if (isObject(v) && Number.isSafeInteger(v.id) && (isObject(v.result) || isObject(v.error)))
      return v as unknown as SpawnerReply;
  } catch {
    // Not a reply.
  }
  return undefined;
}

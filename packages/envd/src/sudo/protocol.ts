/**
 * The wire protocol between the `sudo` client and envd's sudo service, over a Unix socket.
 *
 * Every message is a frame: 1 byte type, 4-byte big-endian payload length, payload (the same
 * envelope as Connect streaming). A session:
 *
 *   server → challenge {nonce, dir}       the client proves its uid by creating <dir>/<nonce>
 *   client → request {…}                  what to run (after creating the proof file)
 *   client → stdin* / signal* / resize*   stdin bytes (empty = EOF), signal names, terminal size
 *   server → stdout* / stderr* / ack*     output, and stdin bytes consumed (flow control)
 *   server → exit {code | signal} or error {message, code}, then closes
 *
 * The client sends at most STDIN_WINDOW unacknowledged stdin bytes, so the server never has to
 * stop reading the socket (and so still sees signals) while the command is not reading stdin.
 */

export const DEFAULT_SUDO_SOCKET = '/run/aenv-envd/sudo.sock';
/** Unacknowledged stdin bytes a client may have in flight. */
export const STDIN_WINDOW = 1 << 20;
/** Signals the client relays to the command (SIGINT also arrives as ^C through a terminal). */
export const RELAYED_SIGNALS: readonly NodeJS.Signals[] = [
  'SIGHUP',
  'SIGINT',
  'SIGQUIT',
  'SIGTERM',
  'SIGUSR1',
  'SIGUSR2',
  'SIGALRM',
  'SIGCONT',
];
/** Largest frame either side accepts (a request carries the caller's whole environment). */
export const MAX_FRAME = 8 << 20;

export const FrameType = {
  // client → server
  request: 1,
  stdin: 2,
  signal: 3,
  resize: 4,
  // server → client
  challenge: 16,
  stdout: 17,
  stderr: 18,
  exit: 19,
  error: 20,
  ack: 21,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

export interface Frame {
  type: number;
  payload: Buffer;
}

export interface Challenge {
  nonce: string;
  /** The directory the proof file goes in: world-writable, sticky, not listable. */
  dir: string;
}

export type SudoAction = 'run' | 'validate' | 'list';

export interface SudoRequest {
  action: SudoAction;
  /** The command and its arguments; empty with -i/-s for an interactive shell. */
  argv: string[];
  /** Target user (-u): a name or #uid; root when omitted (or the caller, with -g alone). */
  user?: string;
  /** Target group (-g): a name or #gid. */
  group?: string;
  /** -i: the target's login shell, in the target's home, with a fresh environment. */
  login?: boolean;
  /** -s: the shell ($SHELL or the caller's), with the command passed to -c. */
  shell?: boolean;
  /** -H: HOME is the target's home (already so unless the environment is preserved). */
  setHome?: boolean;
  /** -E (true) or --preserve-env=A,B (the names). */
  preserveEnv?: boolean | string[];
  /** VAR=value arguments before the command. */
  assignments?: Record<string, string>;
  /** -D: the working directory. */
  chdir?: string;
  /** -U with -l: whose privileges to list. */
  listUser?: string;
  /** The caller's environment and working directory. */
  env: Record<string, string>;
  cwd: string;
  /** Present when the caller's stdin and stdout are terminals: run on a pseudo-terminal. */
  tty?: { cols: number; rows: number };
}

export interface ExitMessage {
  code?: number;
  signal?: string;
}

export interface ErrorMessage {
  message: string;
  /** The client's exit code. */
  code: number;
}

/** A refusal of a request: the client prints `sudo: <message>` and exits with 1. */
export class SudoRefusal extends Error {}

const isStrings = (v: unknown): boolean => Array.isArray(v) && v.every((x) => typeof x === 'string');
const isStringMap = (v: unknown): boolean =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  Object.values(v).every((x) => typeof x === 'string');
const optional = (v: unknown, check: (v: unknown) => boolean): boolean => v === undefined || check(v);
const isString = (v: unknown): boolean => typeof v === 'string';

/** A request frame's payload, checked field by field: it comes from any local user. */
export function parseRequest(payload: Uint8Array): SudoRequest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    throw new SudoRefusal('protocol error: the request is not JSON');
  }
  if (typeof parsed !== 'object' || parsed === null)
    throw new SudoRefusal('protocol error: malformed request');
  const r = parsed as Record<string, unknown>;
  const tty = r.tty as { cols?: unknown; rows?: unknown } | undefined;
  const valid =
    ['run', 'validate', 'list'].includes(r.action as string) &&
    isStrings(r.argv) &&
    isStringMap(r.env) &&
    isString(r.cwd) &&
    ['user', 'group', 'chdir', 'listUser'].every((k) => optional(r[k], isString)) &&
    ['login', 'shell', 'setHome'].every((k) => optional(r[k], (v) => typeof v === 'boolean')) &&
    optional(r.preserveEnv, (v) => typeof v === 'boolean' || isStrings(v)) &&
    optional(r.assignments, isStringMap) &&
    optional(tty, () => typeof tty?.cols === 'number' && typeof tty.rows === 'number');
  if (!valid) throw new SudoRefusal('protocol error: malformed request');
  return r as unknown as SudoRequest;
}

export function encodeFrame(type: number, payload: Uint8Array | string = new Uint8Array(0)): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const frame = Buffer.allocUnsafe(5 + body.length);
  frame[0] = type;
  frame.writeUInt32BE(body.length, 1);
  frame.set(body, 5);
  return frame;
}

export const jsonFrame = (type: number, value: unknown): Buffer => encodeFrame(type, JSON.stringify(value));

/** Splits a byte stream into frames, whatever the chunk boundaries. */
export class FrameDecoder {
  private buffered: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxFrame = MAX_FRAME) {}

  /** The frames completed by `chunk`; throws on a frame larger than the limit. */
  push(chunk: Buffer): Frame[] {
    if (chunk.length) this.buffered.push(chunk);
    this.size += chunk.length;
    const frames: Frame[] = [];
    while (this.size >= 5) {
      // Only the header is joined until the whole frame is there: no quadratic copying.
      const head = this.take(5, false);
      const length = head.readUInt32BE(1);
      if (length > this.maxFrame)
        throw new Error(`frame of ${length} bytes exceeds the ${this.maxFrame} limit`);
      if (this.size < 5 + length) break;
      const frame = this.take(5 + length, true);
      frames.push({ type: frame[0]!, payload: frame.subarray(5) });
    }
    return frames;
  }

  /** Bytes received but not yet part of a complete frame. */
  get pending(): number {
    return this.size;
  }

  /** The first `n` buffered bytes (n <= size), removed when `consume`. */
  private take(n: number, consume: boolean): Buffer {
    let i = 0;
    for (let have = 0; have < n; i++) have += this.buffered[i]!.length;
    if (i > 1) this.buffered.splice(0, i, Buffer.concat(this.buffered.slice(0, i)));
    const first = this.buffered[0]!;
    const out = first.subarray(0, n);
    if (consume) {
      if (first.length === n) this.buffered.shift();
      else this.buffered[0] = first.subarray(n);
      this.size -= n;
    }
    return out;
  }
}

/** The payload of an ack frame: `n` stdin bytes consumed, 4 bytes big-endian. */
export function ackPayload(n: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n);
  return b;
}

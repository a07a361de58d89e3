/**
 * `sudo` for AgentENV sandboxes (bin/sudo of the tools bundle). gVisor sets no_new_privs on
 * every process, so the setuid sudo cannot gain root; this client asks envd (root, pid 1) to run
 * the command instead, over envd's sudo socket, and relays stdin, stdout, stderr, signals,
 * the terminal size and the exit status. See src/sudo/protocol.ts and src/sudo/service.ts.
 */
import { connect } from 'node:net';
import { constants as osConstants } from 'node:os';
import { HELP, parseSudoArgs, SUDO_COMPAT_VERSION, USAGE } from './args.js';
import { writeProof } from './proof.js';
import {
  type Challenge,
  DEFAULT_SUDO_SOCKET,
  encodeFrame,
  type ErrorMessage,
  type ExitMessage,
  type Frame,
  FrameDecoder,
  FrameType,
  jsonFrame,
  RELAYED_SIGNALS,
  STDIN_WINDOW,
  type SudoRequest,
} from './protocol.js';

let rawTty = false;

function exit(code: number): never {
  if (rawTty) process.stdin.setRawMode(false);
  process.exit(code);
}

function fail(message: string, code = 1): never {
  process.stderr.write(`sudo: ${message}\n`);
  exit(code);
}

function currentDir(): string {
  try {
    return process.cwd();
  } catch {
    return process.env.PWD ?? '/';
  }
}

/** Answers envd's challenge (see proof.ts); a failure ends the client. */
function prove(challenge: Challenge): void {
  try {
    writeProof(challenge);
  } catch (err) {
    fail(`cannot prove who you are to envd: ${(err as Error).message}`);
  }
}

function run(partial: Omit<SudoRequest, 'env' | 'cwd' | 'tty'>): void {
  const socketPath = process.env.AENV_SUDO_SOCKET || DEFAULT_SUDO_SOCKET;
  const interactive = partial.action === 'run' && process.stdin.isTTY && process.stdout.isTTY;
  const request: SudoRequest = {
    ...partial,
    env: process.env as Record<string, string>,
    cwd: currentDir(),
    ...(interactive ? { tty: { cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 } } : {}),
  };
  const socket = connect(socketPath);
  const decoder = new FrameDecoder();
  let connected = false;
  let done = false;
  let inFlight = 0;
  const send = (type: number, payload?: Uint8Array | string) => {
    if (!socket.destroyed) socket.write(encodeFrame(type, payload));
  };

  const startRelay = () => {
    if (partial.action !== 'run') return;
    const stdin = process.stdin;
    if (interactive) {
      stdin.setRawMode(true);
      rawTty = true;
      process.stdout.on('resize', () =>
        send(FrameType.resize, JSON.stringify({ cols: process.stdout.columns, rows: process.stdout.rows })),
      );
    }
    stdin.on('data', (d: Buffer) => {
      send(FrameType.stdin, d);
      inFlight += d.length;
      if (inFlight >= STDIN_WINDOW) stdin.pause();
    });
    const eof = () => send(FrameType.stdin);
    stdin.once('end', eof);
    stdin.once('error', eof);
    for (const sig of RELAYED_SIGNALS) process.on(sig, () => send(FrameType.signal, sig));
  };

  // Output: a full stdout/stderr stops reading the socket, and so, in turn, the command.
  const blocked = new Set<NodeJS.WriteStream>();
  const broken = new Set<NodeJS.WriteStream>();
  const unblock = (stream: NodeJS.WriteStream) => {
    if (blocked.delete(stream) && blocked.size === 0) socket.resume();
  };
  const output = (stream: NodeJS.WriteStream, data: Buffer) => {
    if (broken.has(stream) || stream.destroyed) return;
    if (!stream.write(data) && !blocked.has(stream)) {
      if (blocked.size === 0) socket.pause();
      blocked.add(stream);
      stream.once('drain', () => unblock(stream));
    }
  };
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (broken.has(stream)) return;
      broken.add(stream);
      unblock(stream);
      // Like a command writing straight to a closed pipe: it gets SIGPIPE.
      if (err.code === 'EPIPE') send(FrameType.signal, 'SIGPIPE');
    });
  }
  // A paused socket does not keep node running: the command's end is what ends this process.
  setInterval(() => undefined, 1 << 30);

  const onFrame = (f: Frame) => {
    switch (f.type) {
      case FrameType.challenge:
        prove(JSON.parse(f.payload.toString('utf8')) as Challenge);
        socket.write(jsonFrame(FrameType.request, request));
        startRelay();
        break;
      case FrameType.stdout:
        output(process.stdout, f.payload);
        break;
      case FrameType.stderr:
        output(process.stderr, f.payload);
        break;
      case FrameType.ack:
        inFlight -= f.payload.readUInt32BE(0);
        if (inFlight < STDIN_WINDOW && process.stdin.isPaused()) process.stdin.resume();
        break;
      case FrameType.exit: {
        done = true;
        const end = JSON.parse(f.payload.toString('utf8')) as ExitMessage;
        const signo = end.signal ? (osConstants.signals as Record<string, number>)[end.signal] : undefined;
        exit(end.signal ? 128 + (signo ?? 0) : (end.code ?? 1));
        break;
      }
      case FrameType.error: {
        done = true;
        const e = JSON.parse(f.payload.toString('utf8')) as ErrorMessage;
        fail(e.message, e.code || 1);
        break;
      }
      default:
        fail(`protocol error: unexpected frame type ${f.type} from envd`);
    }
  };

  socket.on('connect', () => (connected = true));
  socket.on('data', (chunk: Buffer) => {
    try {
      for (const f of decoder.push(chunk)) onFrame(f);
    } catch (err) {
      fail(`protocol error: ${(err as Error).message}`);
    }
  });
  socket.on('error', (err: NodeJS.ErrnoException) => {
    if (done) return;
    if (!connected) {
      fail(`unable to reach envd's sudo service at ${socketPath} (${err.code ?? err.message})`);
    }
    fail(`lost the connection to envd: ${err.message}`);
  });
  socket.on('close', () => {
    if (!done) fail('lost the connection to envd');
  });
}

const invocation = parseSudoArgs(process.argv.slice(2));
switch (invocation.kind) {
  case 'help':
    process.stdout.write(`${HELP}\n`);
    exit(0);
    break;
  case 'version':
    process.stdout.write(
      `Sudo version ${SUDO_COMPAT_VERSION}\n` +
        'AgentENV sudo: commands run through envd, the sandbox daemon (gVisor forbids setuid)\n',
    );
    exit(0);
    break;
  case 'noop':
    exit(0);
    break;
  case 'usage':
    if (invocation.message) process.stderr.write(`sudo: ${invocation.message}\n`);
    process.stderr.write(`${USAGE}\n`);
    exit(1);
    break;
  case 'error':
    fail(invocation.message);
    break;
  case 'request':
    run(invocation.request);
}

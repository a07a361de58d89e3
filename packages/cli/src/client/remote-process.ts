import { InputQueue } from '../terminal/input-queue.js';
import { processClient, type ProcessClient, type SandboxTarget } from './envd.js';

/** Keepalive events from envd every 50 s of silence (as the E2B SDK asks). */
export const KEEPALIVE_HEADERS = { 'keepalive-ping-interval': '50' };

/**
 * A process being started in a sandbox: its RPC client, the pid once envd reports it, and an
 * input queue that forwards a local stream (stdin or terminal bytes) in order. A failed input
 * request aborts the event stream, so the caller sees one error.
 */
export class RemoteProcess {
  readonly client: ProcessClient;
  readonly abort = new AbortController();
  readonly input: InputQueue;
  pid: number | undefined;
  inputError: unknown;
  private source: NodeJS.ReadStream | undefined;

  constructor(target: SandboxTarget, user: string | undefined, kind: 'stdin' | 'pty') {
    this.client = processClient(target, user);
    this.input = new InputQueue(
      async (chunk) => {
        await this.client.sendInput({
          process: this.selector(),
          input: { input: { case: kind, value: chunk } },
        });
      },
      (err) => {
        this.inputError = err;
        this.abort.abort();
      },
      1 << 20,
      256 << 10,
      () => this.source?.resume(),
    );
  }

  selector() {
    return { selector: { case: 'pid' as const, value: this.pid! } };
  }

  /** The start event arrived: input can flow. */
  started(pid: number): void {
    this.pid = pid;
    this.input.open();
  }

  /** Forwards a local stream, pausing it while too much is buffered. Returns the detach function. */
  forward(stream: NodeJS.ReadStream, onEnd?: () => void): () => void {
    this.source = stream;
    const onData = (chunk: Buffer) => {
      this.input.push(chunk);
      if (this.input.full) stream.pause();
    };
    const end = () => onEnd?.();
    stream.on('data', onData);
    stream.once('end', end);
    stream.resume();
    return () => {
      stream.off('data', onData);
      stream.off('end', end);
      stream.pause();
      this.source = undefined;
    };
  }
}

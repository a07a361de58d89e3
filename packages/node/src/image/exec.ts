import { spawn } from 'node:child_process';

export interface StreamedResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The last lines of combined output, for error messages. */
  readonly tail: string[];
}

/**
 * Runs a long command and hands each output line to `onLine` as it arrives, so a build that
 * takes minutes shows progress instead of silence.
 */
export function runStreamed(
  cmd: string,
  args: string[],
  onLine: (line: string) => void,
  opts: { env?: NodeJS.ProcessEnv; tailLines?: number; signal?: AbortSignal } = {},
): Promise<StreamedResult> {
  const keep = opts.tailLines ?? 40;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
    const tail: string[] = [];
    const feed = (stream: NodeJS.ReadableStream) => {
      let buf = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        buf += chunk;
        // Progress bars redraw with \r; treat them as line ends so each update is one line.
        const parts = buf.split(/\r?\n|\r/);
        buf = parts.pop() ?? '';
        for (const line of parts) emit(line);
      });
      stream.on('end', () => buf && emit(buf));
    };
    const emit = (line: string) => {
      if (!line.trim()) return;
      tail.push(line);
      if (tail.length > keep) tail.shift();
      onLine(line);
    };
    feed(child.stdout);
    feed(child.stderr);
    // Aborted: SIGTERM, and the result once the command has exited (and cleaned up after itself).
    const abort = () => child.kill('SIGTERM');
    if (opts.signal?.aborted) abort();
    opts.signal?.addEventListener('abort', abort, { once: true });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      opts.signal?.removeEventListener('abort', abort);
      resolve({ code, signal, tail });
    });
  });
}

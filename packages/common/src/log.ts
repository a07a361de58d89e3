import { pino, type DestinationStream, type Logger } from 'pino';
import { isColorSupported, prettyFactory } from 'pino-pretty';
import { invalid } from './errors.js';
import { logOptions } from './secrets.js';

/** How a process writes its log: one JSON object a line, or one coloured line for a person. */
export type LogFormat = 'pretty' | 'json';

const FORMATS: readonly LogFormat[] = ['pretty', 'json'];

/**
 * `AENV_LOG_FORMAT` when set; otherwise pretty on a terminal and JSON anywhere else (a file, a
 * pipe, journald), where a program reads the lines.
 */
export function logFormat(env: Readonly<Record<string, string | undefined>>, isTTY: boolean): LogFormat {
  const asked = env.AENV_LOG_FORMAT;
  if (!asked) return isTTY ? 'pretty' : 'json';
  if (!(FORMATS as readonly string[]).includes(asked))
    throw invalid(`AENV_LOG_FORMAT must be one of ${FORMATS.join(', ')}, not '${asked}'`);
  return asked as LogFormat;
}

/** Where a logger writes, and the environment that chooses its format. */
export interface LogTarget {
  /** stdout unless given. */
  readonly out?: NodeJS.WritableStream & { readonly isTTY?: boolean };
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * A pretty destination: each line pino hands it (already through the secret-redacting hook of
 * `logOptions`) is reformatted, so it shows exactly what the JSON line would have. Written in
 * place rather than through pino-pretty's transport stream: that one is asynchronous and loses
 * the last lines of a process that exits.
 */
function prettyLines(out: NodeJS.WritableStream, colorize: boolean): DestinationStream {
  const pretty = prettyFactory({
    colorize,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
  });
  return { write: (line: string) => void out.write(pretty(line)) };
}

/**
 * The logger of the node, the gateway or the scheduler: secrets redacted, written in the format
 * `logFormat` chooses for its output.
 */
export function processLogger(name: string, level: string, target: LogTarget = {}): Logger {
  const out = target.out ?? process.stdout;
  const format = logFormat(target.env ?? process.env, out.isTTY === true);
  if (format === 'pretty')
    return pino(logOptions(name, level), prettyLines(out, out === process.stdout && isColorSupported));
  return pino(logOptions(name, level), target.out ?? pino.destination(1));
}

/** The subset of a pino logger that progress reporting uses, so callers can pass pino or a stub. */
export interface Log {
  info(msg: string): void;
  warn(msg: string): void;
}

export const silentLog: Log = { info: () => {}, warn: () => {} };

/** The subset of a pino logger that progress reporting uses, so callers can pass pino or a stub. */
export interface Log {
  info(msg: string): void;
  warn(msg: string): void;
}

export const silentLog: Log = { info: () => {}, warn: () => {} };

/** Exit codes of `aenv` (besides `exec`, which exits with the remote command's code). */
export const EXIT = { ok: 0, error: 1, usage: 2 } as const;

/** An error meant for the user: printed as `aenv: <message>` without a stack trace. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.error,
    /** A second line telling the user what to do about it. */
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export class UsageError extends CliError {
  constructor(message: string, hint?: string) {
    super(message, EXIT.usage, hint);
    this.name = 'UsageError';
  }
}

/** Renders any thrown value as the lines printed on stderr. */
export function describeError(err: unknown): string {
  if (err instanceof CliError) return err.hint ? `${err.message}\n${err.hint}` : err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}

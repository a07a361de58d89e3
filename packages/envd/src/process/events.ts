/** What a running process reports to its subscribers. */
export type ProcessOutput =
  { kind: 'data'; stream: 'stdout' | 'stderr' | 'pty'; data: Uint8Array } | { kind: 'end'; end: ProcessEnd };

export interface ProcessEnd {
  exitCode: number;
  /** False when a signal ended the process. */
  exited: boolean;
  /** Go's ProcessState wording, which E2B clients show: "exit status 1", "signal: killed". */
  status: string;
  error?: string;
}

const SIGNAL_WORDS: Record<string, string> = {
  SIGKILL: 'killed',
  SIGTERM: 'terminated',
  SIGINT: 'interrupt',
  SIGHUP: 'hangup',
  SIGPIPE: 'broken pipe',
  SIGSEGV: 'segmentation fault',
  SIGABRT: 'aborted',
  SIGQUIT: 'quit',
};

/** The end event for an exit code or a terminating signal. */
export function processEnd(code: number | null, signal: NodeJS.Signals | null): ProcessEnd {
  // Like Go's cmd.Wait(), an unsuccessful end also carries its status as the error text, which
  // the SDKs surface as the CommandExitError message.
  if (signal) {
    const status = `signal: ${SIGNAL_WORDS[signal] ?? signal}`;
    return { exitCode: -1, exited: false, status, error: status };
  }
  const exitCode = code ?? -1;
  const status = `exit status ${exitCode}`;
  return exitCode === 0
    ? { exitCode, exited: true, status }
    : { exitCode, exited: true, status, error: status };
}

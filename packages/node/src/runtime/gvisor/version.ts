/** The oldest runsc with systrap, --overlay2 and a checkpoint that survives epoll'd sockets. */
export const MIN_RUNSC_DATE = 20240729;

export const RUNSC_FIX =
  'install the bookworm-backports build: add bookworm-backports to apt sources, then ' +
  '`apt-get install -t bookworm-backports runsc` (scripts/setup.sh does both)';

export interface RunscVersion {
  /** The version string as printed, e.g. `0.0~20240729.0` or `release-20240729.0`. */
  readonly raw: string;
  /** YYYYMMDD of the build. */
  readonly date: number;
}

/**
 * Parses `runsc --version`. Debian versions the package `0.0~YYYYMMDD.N`, upstream releases
 * print `release-YYYYMMDD.N`.
 */
export function parseRunscVersion(output: string): RunscVersion | null {
  const line = /^runsc version (\S+)/m.exec(output);
  if (!line?.[1]) return null;
  const date = /(?:^|[^0-9])(\d{8})(?:\.\d+)?(?:[^0-9]|$)/.exec(line[1]);
  if (!date?.[1]) return null;
  return { raw: line[1], date: Number(date[1]) };
}

/** null when usable, otherwise the reason it is not (naming the fix). */
export function runscVersionProblem(version: RunscVersion | null, output: string): string | null {
  if (!version)
    return `cannot parse \`runsc --version\` output (${output.trim().slice(0, 120)}); ${RUNSC_FIX}`;
  if (version.date < MIN_RUNSC_DATE) {
    return `runsc ${version.raw} is too old (need a build from ${MIN_RUNSC_DATE} or later: older ones cannot checkpoint sockets and kill the sandbox when a checkpoint fails); ${RUNSC_FIX}`;
  }
  return null;
}

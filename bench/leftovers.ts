/**
 * What a benchmark's node must not leave behind, and cleanup on Ctrl-C: shared by the benchmarks
 * that start their own aenv-server (bench/snapshot.ts, bench/templates.ts).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * Network namespaces whose names start with one of `netnsPrefixes`, mounts under `paths`, and runsc
 * processes that mention one of `paths`: one line each, empty when all is gone.
 */
export function leftBehind(netnsPrefixes: readonly string[], paths: readonly string[]): string[] {
  const mentions = (l: string) => paths.some((p) => l.includes(p));
  return [
    ...execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => netnsPrefixes.some((p) => l.startsWith(p))),
    ...readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(mentions),
    ...execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes('runsc') && mentions(l)),
  ];
}

/** Runs `cleanup` once on SIGINT or SIGTERM, then exits with 130. */
export function cleanupOnSignals(cleanup: () => Promise<void>): void {
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      console.error(`${sig}: cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }
}

import { readdirSync, readFileSync } from 'node:fs';

/**
 * Environment for a real binary (aenv-server, -gateway, -scheduler) that makes it fail on SIGUSR2
 * the way a bug would, with no test hook in the product: a preloaded module throws from a callback
 * (`throw`: an uncaught exception) or rejects a promise nobody awaits (`reject`). The error carries
 * `secret` in a field named like one, so a test sees whether the log redacts it.
 */
export function faultOnSigusr2(mode: 'throw' | 'reject', secret: string): Record<string, string> {
  // The value comes from the environment, so the stack (which names this code) does not hold it.
  const code = `process.on('SIGUSR2', () => {
    const err = Object.assign(new Error('injected fault'), { apiKey: process.env.AENV_FAULT_SECRET });
    if (process.env.AENV_FAULT_MODE === 'throw') throw err;
    void Promise.reject(err);
  });`;
  return {
    NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(code)}`,
    AENV_FAULT_MODE: mode,
    AENV_FAULT_SECRET: secret,
  };
}

/** Every process below `pid` (children, theirs, …), from /proc. */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    for (const task of safe(() => readdirSync(`/proc/${p}/task`), [] as string[])) {
      const children = safe(() => readFileSync(`/proc/${p}/task/${task}/children`, 'utf8'), '');
      for (const c of children.split(' ').filter(Boolean).map(Number)) {
        out.push(c);
        walk(c);
      }
    }
  };
  walk(pid);
  return out;
}

/** A process's environment (NAME=value entries), or [] once it is gone. */
export function environOf(pid: number): string[] {
  return safe(() => readFileSync(`/proc/${pid}/environ`, 'utf8'), '')
    .split('\0')
    .filter(Boolean);
}

function safe<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

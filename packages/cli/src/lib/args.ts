import { UsageError } from '../errors.js';

/** A whole number in [min, max], for count-like options. */
export function parseInteger(text: string, what: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(text.trim()))
    throw new UsageError(`${what} must be a whole number, got ${JSON.stringify(text)}`);
  const n = Number(text.trim());
  if (n < min || n > max) throw new UsageError(`${what} must be between ${min} and ${max}, got ${n}`);
  return n;
}

const UNIT_SECS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Seconds from `300`, `90s`, `5m`, `1h30m` or `2d`; at least `min`. */
export function parseSeconds(text: string, what: string, min = 1): number {
  const t = text.trim().toLowerCase();
  let secs: number;
  if (/^\d+$/.test(t)) secs = Number(t);
  else if (/^(\d+[smhd])+$/.test(t)) {
    secs = 0;
    for (const m of t.matchAll(/(\d+)([smhd])/g)) secs += Number(m[1]) * UNIT_SECS[m[2]!]!;
  } else {
    throw new UsageError(
      `${what} must be seconds or a duration like 90s, 5m, 1h30m; got ${JSON.stringify(text)}`,
    );
  }
  if (secs < min) throw new UsageError(`${what} must be at least ${min} second${min === 1 ? '' : 's'}`);
  return secs;
}

/** `KEY=VALUE` pairs (repeatable options) into a map; the value may contain `=`. */
export function parseKeyValues(pairs: string[] | undefined, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of pairs ?? []) {
    const i = p.indexOf('=');
    if (i <= 0) throw new UsageError(`${what} must look like key=value, got ${JSON.stringify(p)}`);
    out[p.slice(0, i)] = p.slice(i + 1);
  }
  return out;
}

/** Commander collector for repeatable options. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export const SANDBOX_STATES = ['running', 'paused'] as const;

/** `running,paused` (any order, repeats allowed) into a validated list. */
export function parseStates(text: string): string[] {
  const states = [
    ...new Set(
      text
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean),
    ),
  ];
  for (const s of states) {
    if (!(SANDBOX_STATES as readonly string[]).includes(s))
      throw new UsageError(`unknown state ${JSON.stringify(s)}: use ${SANDBOX_STATES.join(', ')}`);
  }
  if (!states.length) throw new UsageError('--state needs at least one state');
  return states;
}

/** POSIX shell quoting: safe words stay bare, the rest go in single quotes. */
export function shellQuote(arg: string): string {
  if (arg !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * The shell command line `exec` runs with `bash -l -c`: a single argument is taken as a command
 * line (pipes, globs, `$VARS` work), several are an argv and are quoted one by one.
 */
export function commandLine(argv: string[]): string {
  if (argv.length === 0) throw new UsageError('no command given', 'Usage: aenv exec <id> -- <cmd...>');
  return argv.length === 1 ? argv[0]! : argv.map(shellQuote).join(' ');
}

const SIGNAL_NUMBERS: Record<string, number> = {
  hangup: 1,
  interrupt: 2,
  quit: 3,
  aborted: 6,
  killed: 9,
  'segmentation fault': 11,
  'broken pipe': 13,
  terminated: 15,
};

/** The local exit code for a remote end event: its code, or 128+signal like a shell. */
export function exitCodeOf(end: { exitCode: number; exited: boolean; status: string }): number {
  if (end.exited && end.exitCode >= 0) return end.exitCode & 0xff;
  const m = /^signal: (.+)$/.exec(end.status);
  const n = m ? SIGNAL_NUMBERS[m[1]!.toLowerCase()] : undefined;
  return n ? 128 + n : 255;
}

/**
 * The default template name for an image: its last path component plus a non-`latest` tag,
 * lowercased, other characters as `-`. `docker.io/library/python:3.12-slim` → `python-3.12-slim`.
 */
export function templateNameForImage(image: string): string {
  const noDigest = image.split('@')[0]!;
  const slash = noDigest.lastIndexOf('/');
  const last = noDigest.slice(slash + 1);
  const colon = last.indexOf(':');
  const repo = colon >= 0 ? last.slice(0, colon) : last;
  const tag = colon >= 0 ? last.slice(colon + 1) : '';
  const raw = tag && tag !== 'latest' ? `${repo}-${tag}` : repo;
  const name = raw
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '');
  if (!name) throw new UsageError(`cannot derive a template name from ${JSON.stringify(image)}: use --name`);
  return name;
}

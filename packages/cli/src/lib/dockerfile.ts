import { UsageError } from '../errors.js';
import type { BuildStep } from '../client/types.js';

/** A Dockerfile turned into an E2B template build: base image, steps and start command. */
export interface DockerfileBuild {
  fromImage: string;
  /** COPY steps still lack their `filesHash`; the builder adds it from the build context. */
  steps: Omit<BuildStep, 'force'>[];
  startCmd?: string;
  /** Instructions that have no template equivalent and were ignored (EXPOSE, LABEL, ...). */
  ignored: string[];
}

interface Instruction {
  keyword: string;
  rest: string;
  line: number;
}

/** Joins continuation lines and drops comments and blank lines. */
export function logicalLines(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split(/\r?\n/);
  let buf = '';
  let start = 0;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    if (!buf && (trimmed === '' || trimmed.startsWith('#'))) continue;
    if (buf && trimmed.startsWith('#')) continue; // comments inside a continued instruction
    if (!buf) start = i + 1;
    if (/\\\s*$/.test(raw)) {
      buf += raw.replace(/\\\s*$/, '');
      continue;
    }
    buf += raw;
    const m = /^\s*(\S+)\s*([\s\S]*)$/.exec(buf);
    if (m) out.push({ keyword: m[1]!.toUpperCase(), rest: m[2]!.trim(), line: start });
    buf = '';
  }
  if (buf.trim()) {
    const m = /^\s*(\S+)\s*([\s\S]*)$/.exec(buf)!;
    out.push({ keyword: m[1]!.toUpperCase(), rest: m[2]!.trim(), line: start });
  }
  return out;
}

/** Shell-like word splitting with quotes and backslash escapes (for ENV, COPY, ...). */
export function splitWords(text: string): string[] {
  const words: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) cur += text[++i];
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < text.length) {
      cur += text[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (quote) throw new UsageError(`unterminated quote in ${JSON.stringify(text)}`);
  if (inWord) words.push(cur);
  return words;
}

/** The exec (JSON array) form, or undefined for the shell form. */
function jsonArray(rest: string): string[] | undefined {
  if (!rest.startsWith('[')) return undefined;
  try {
    const v = JSON.parse(rest) as unknown;
    if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
  } catch {
    // shell form that happens to start with `[`
  }
  return undefined;
}

/** Leading `--flag=value` words of COPY/ADD/RUN/FROM. */
function takeFlags(words: string[]): { flags: Record<string, string>; args: string[] } {
  const flags: Record<string, string> = {};
  let i = 0;
  for (; i < words.length && words[i]!.startsWith('--'); i++) {
    const w = words[i]!.slice(2);
    const eq = w.indexOf('=');
    flags[eq < 0 ? w : w.slice(0, eq)] = eq < 0 ? '' : w.slice(eq + 1);
  }
  return { flags, args: words.slice(i) };
}

function envPairs(rest: string, keyword: string, line: number): string[] {
  const words = splitWords(rest);
  if (!words.length) throw new UsageError(`line ${line}: ${keyword} needs arguments`);
  if (keyword === 'ENV' && !words[0]!.includes('=')) {
    // Legacy form: ENV KEY value with spaces
    const m = /^(\S+)\s+([\s\S]*)$/.exec(rest);
    if (!m) throw new UsageError(`line ${line}: ENV ${words[0]} has no value`);
    return [m[1]!, splitWords(m[2]!).join(' ')];
  }
  const out: string[] = [];
  for (const w of words) {
    const eq = w.indexOf('=');
    if (eq > 0) out.push(w.slice(0, eq), w.slice(eq + 1));
    else if (keyword === 'ARG') out.push(w, '');
    else throw new UsageError(`line ${line}: ENV expects KEY=VALUE, got ${JSON.stringify(w)}`);
  }
  return out;
}

const IGNORED = new Set([
  'EXPOSE',
  'VOLUME',
  'LABEL',
  'MAINTAINER',
  'STOPSIGNAL',
  'HEALTHCHECK',
  'SHELL',
  'ONBUILD',
]);

/**
 * Translates a Dockerfile the way E2B's `Template.fromDockerfile` does: one FROM (no stages),
 * RUN/ENV/ARG/WORKDIR/USER/COPY/ADD become steps, CMD/ENTRYPOINT the start command. Steps run as
 * root in `/` unless the file says otherwise, and the sandbox then defaults to `user` in
 * `/home/user` unless USER/WORKDIR were set.
 */
export function parseDockerfile(text: string): DockerfileBuild {
  const instructions = logicalLines(text);
  const froms = instructions.filter((i) => i.keyword === 'FROM');
  if (froms.length === 0) throw new UsageError('the Dockerfile has no FROM instruction');
  if (froms.length > 1) throw new UsageError('multi-stage Dockerfiles (several FROM) are not supported');
  const fromArgs = takeFlags(splitWords(froms[0]!.rest)).args;
  if (!fromArgs[0]) throw new UsageError(`line ${froms[0]!.line}: FROM needs an image`);

  const steps: DockerfileBuild['steps'] = [
    { type: 'USER', args: ['root'] },
    { type: 'WORKDIR', args: ['/'] },
  ];
  const ignored: string[] = [];
  let userSet = false;
  let workdirSet = false;
  let entrypoint: string | undefined;
  let cmd: string | undefined;
  const command = (rest: string) => {
    const arr = jsonArray(rest);
    return arr ? arr.join(' ') : rest;
  };

  for (const ins of instructions) {
    const { keyword, rest, line } = ins;
    switch (keyword) {
      case 'FROM':
        break;
      case 'RUN': {
        if (/^--\S/.test(rest))
          throw new UsageError(`line ${line}: RUN flags (${rest.split(/\s/)[0]}) are not supported`);
        if (!rest) throw new UsageError(`line ${line}: RUN needs a command`);
        steps.push({ type: 'RUN', args: [command(rest)] });
        break;
      }
      case 'ENV':
      case 'ARG':
        steps.push({ type: 'ENV', args: envPairs(rest, keyword, line) });
        break;
      case 'WORKDIR':
        if (!rest) throw new UsageError(`line ${line}: WORKDIR needs a path`);
        steps.push({ type: 'WORKDIR', args: [splitWords(rest).join(' ')] });
        workdirSet = true;
        break;
      case 'USER':
        if (!rest) throw new UsageError(`line ${line}: USER needs a user`);
        steps.push({ type: 'USER', args: [splitWords(rest)[0]!] });
        userSet = true;
        break;
      case 'COPY':
      case 'ADD': {
        const { flags, args: words } = takeFlags(splitWords(rest));
        if ('from' in flags) throw new UsageError(`line ${line}: COPY --from (multi-stage) is not supported`);
        const arr = jsonArray(rest.replace(/^(--\S+\s+)*/, ''));
        const args = arr ?? words;
        if (args.length < 2)
          throw new UsageError(`line ${line}: ${keyword} needs a source and a destination`);
        const dest = args[args.length - 1]!;
        for (const src of args.slice(0, -1)) {
          if (/^[a-z]+:\/\//i.test(src))
            throw new UsageError(`line ${line}: ADD from a URL is not supported`);
          steps.push({ type: 'COPY', args: [src, dest, flags.chown ?? '', flags.chmod ?? ''] });
        }
        break;
      }
      case 'CMD':
        cmd = command(rest);
        break;
      case 'ENTRYPOINT':
        entrypoint = command(rest);
        break;
      default:
        if (IGNORED.has(keyword)) ignored.push(`${keyword} (line ${line})`);
        else throw new UsageError(`line ${line}: unknown instruction ${keyword}`);
    }
  }
  if (!userSet) steps.push({ type: 'USER', args: ['user'] });
  if (!workdirSet) steps.push({ type: 'WORKDIR', args: ['/home/user'] });
  const startCmd = [entrypoint, cmd].filter(Boolean).join(' ') || undefined;
  return { fromImage: fromArgs[0], steps, ...(startCmd ? { startCmd } : {}), ignored };
}

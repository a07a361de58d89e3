import { posix } from 'node:path';
import type { EnvdApi } from '../../envd/index.js';
import type { BuildFiles } from './files.js';
import type { BuildLog } from './log.js';
import { userName } from '@agentenv/oci';

/** One step of an E2B template build (`steps[]` of POST /v2/templates/{id}/builds/{buildID}). */
export interface BuildStep {
  readonly type: string;
  readonly args: readonly string[];
  readonly filesHash?: string;
}

/** What later steps and the finished template inherit: Dockerfile semantics. */
export interface BuildState {
  user: string;
  workdir: string | undefined;
  /** ENV: kept in the template. */
  env: Record<string, string>;
  /** ARG: visible to later steps of the build only. */
  args: Record<string, string>;
}

/** A step failed; `step` is its 1-based position (0 is the base image or template, as E2B counts). */
export class StepError extends Error {
  constructor(
    readonly step: number,
    message: string,
  ) {
    super(message);
  }
}

export const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** `$NAME` and `${NAME}` from the variables so far, as Dockerfile ENV/WORKDIR expand them. */
function expand(s: string, vars: Record<string, string>): string {
  return s.replace(
    /\$\{(\w+)\}|\$(\w+)/g,
    (_, a: string | undefined, b: string | undefined) => vars[a ?? b!] ?? '',
  );
}

/** Runs a template's steps one after another in the build sandbox, through its envd. */
export class StepRunner {
  constructor(
    private readonly envd: EnvdApi,
    private readonly files: BuildFiles,
    private readonly log: BuildLog,
    readonly state: BuildState,
  ) {}

  private vars(): Record<string, string> {
    return { ...this.state.args, ...this.state.env };
  }

  private abs(p: string): string {
    return posix.resolve(this.state.workdir ?? '/', expand(p, this.vars()));
  }

  /** A shell command as root; a failure is the step's. */
  private async root(cmd: string, what: string, step: number): Promise<void> {
    const out: string[] = [];
    const code = await this.envd.exec({ cmd, user: 'root', onOutput: (t) => out.push(t) });
    if (code !== 0) throw new StepError(step, `${what} failed (exit code ${code}): ${out.join('').trim()}`);
  }

  async run(steps: readonly BuildStep[]): Promise<void> {
    for (const [i, step] of steps.entries()) {
      const n = i + 1;
      this.log.info(`[${n}/${steps.length}] ${step.type} ${step.args.filter(Boolean).join(' ')}`);
      await this.step(step, n);
    }
  }

  private async step(step: BuildStep, n: number): Promise<void> {
    const [a0 = '', a1 = '', a2 = '', a3 = ''] = step.args;
    switch (step.type) {
      case 'RUN':
        return this.runCommand(a0, a1 || this.state.user, n);
      case 'ENV':
      case 'ARG': {
        const target = step.type === 'ENV' ? this.state.env : this.state.args;
        for (let k = 0; k < step.args.length; k += 2)
          target[step.args[k]!] = expand(step.args[k + 1] ?? '', this.vars());
        return;
      }
      case 'WORKDIR': {
        const dir = this.abs(a0);
        await this.root(`mkdir -p -- ${shellQuote(dir)}`, `WORKDIR ${dir}`, n);
        this.state.workdir = dir;
        return;
      }
      case 'USER': {
        const passwd = (await this.envd.readFile('/etc/passwd'))?.toString();
        try {
          this.state.user = userName(expand(a0, this.vars()), passwd);
        } catch (e) {
          throw new StepError(n, `USER ${a0}: ${(e as Error).message}`);
        }
        return;
      }
      case 'COPY':
        return this.copy(a0, a1, a2 || this.state.user, a3, step.filesHash, n);
      default:
        throw new StepError(n, `unsupported step type ${step.type}`);
    }
  }

  private async runCommand(cmd: string, user: string, n: number): Promise<void> {
    const code = await this.envd.exec({
      cmd,
      user,
      ...(this.state.workdir ? { cwd: this.state.workdir } : {}),
      envs: this.vars(),
      onOutput: (text) => this.log.output(text),
      timeoutMs: 30 * 60_000,
    });
    this.log.flush();
    if (code !== 0) throw new StepError(n, `RUN ${cmd} failed with exit code ${code}`);
  }

  private async copy(
    src: string,
    destArg: string,
    owner: string,
    mode: string,
    hash: string | undefined,
    n: number,
  ) {
    if (!hash) throw new StepError(n, `COPY ${src} has no filesHash`);
    if (mode && !/^[0-7]{3,4}$/.test(mode)) throw new StepError(n, `COPY ${src}: bad mode '${mode}'`);
    const dest = destArg.endsWith('/') ? `${this.abs(destArg)}/` : this.abs(destArg);
    const modes = new Map<string, number>();
    const dirs: string[] = [];
    let count = 0;
    for await (const e of this.files.entries(hash, src, dest)) {
      count++;
      if (e.type === 'dir') dirs.push(e.target);
      else await this.envd.writeFile(e.target, e.data, owner);
      modes.set(e.target, mode ? parseInt(mode, 8) : e.mode);
    }
    if (count === 0) throw new StepError(n, `COPY ${src}: the uploaded files hold nothing under ${src}`);
    const cmds = [
      ...(dirs.length ? [`mkdir -p -- ${dirs.map(shellQuote).join(' ')}`] : []),
      ...(dirs.length ? [`chown ${shellQuote(owner)} -- ${dirs.map(shellQuote).join(' ')}`] : []),
      ...[...modes].map(([p, m]) => `chmod ${m.toString(8)} -- ${shellQuote(p)}`),
    ];
    await this.root(cmds.join(' && '), `COPY ${src} ${destArg}`, n);
    this.log.info(`copied ${count} entries to ${dest}`);
  }
}

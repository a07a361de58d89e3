import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { initDefaults, type EnvdApi, type EnvdConnector } from '../../envd/index.js';
import type { Credentials } from '@agentenv/oci';
import type { NetworkManager } from '../../network/index.js';
import type { SourceResolver } from '../../orchestrator/index.js';
import type { Resources, RuntimeDriver, SandboxHandle } from '../../runtime/index.js';
import type { ImageBoot, SandboxDefaults } from '../image-boot.js';
import type { BuildFiles } from './files.js';
import type { BuildLog } from './log.js';
import { StepError, StepRunner, type BuildState, type BuildStep } from './steps.js';

/** The body of POST /v2/templates/{id}/builds/{buildID}. */
export interface BuildSpec {
  readonly fromImage?: string;
  readonly fromTemplate?: string;
  readonly fromImageRegistry?: {
    readonly type: string;
    readonly username?: string;
    readonly password?: string;
  };
  readonly startCmd?: string;
  readonly readyCmd?: string;
  readonly steps: readonly BuildStep[];
}

/** What a finished build leaves: the ready state and what sandboxes from it inherit. */
export interface BuildResult {
  readonly captureDir: string;
  readonly defaults: SandboxDefaults;
  readonly source: { readonly image?: string; readonly digest?: string; readonly template?: string };
}

export interface BuildRunnerDeps {
  driver: RuntimeDriver;
  network: NetworkManager;
  images: ImageBoot;
  /** What a build may start from (`fromTemplate`: built templates and `base`). */
  sources: SourceResolver;
  envd: EnvdConnector;
  files: BuildFiles;
  /** Where ready states are captured before they go to the snapshot repository. */
  workDir: string;
}

const READY_TIMEOUT_MS = 120_000;
const READY_INTERVAL_MS = 500;

/**
 * Runs one template build: boots a sandbox from the image (or restores the base template),
 * runs the steps through envd as Dockerfile would, starts the start command, waits for the ready
 * command to succeed and captures the ready state. The sandbox is always killed afterwards.
 */
export class BuildRunner {
  constructor(private readonly d: BuildRunnerDeps) {}

  async run(spec: BuildSpec, resources: Resources, log: BuildLog, pinAs: string): Promise<BuildResult> {
    const slot = await this.d.network.acquire();
    let handle: SandboxHandle | undefined;
    try {
      const base = await this.boot(spec, resources, log, pinAs, slot);
      handle = base.handle;
      const envd = this.d.envd(slot.hostAddress, handle.envdPort);
      const state: BuildState = {
        user: base.defaults.user ?? 'user',
        workdir: base.defaults.workdir,
        env: { ...base.defaults.envVars },
        args: {},
      };
      await new StepRunner(envd, this.d.files, log, state).run(spec.steps);
      const defaults: SandboxDefaults = {
        user: state.user,
        envVars: state.env,
        ...(state.workdir ? { workdir: state.workdir } : {}),
      };
      // Kept in envd's memory, so in the capture: every sandbox starts with them.
      await envd.init({
        envVars: state.env,
        ...initDefaults(defaults),
        timestamp: new Date().toISOString(),
      });
      if (spec.startCmd) await this.start(envd, spec, state, log);
      log.info('capturing the ready state');
      const captureDir = join(this.d.workDir, `capture-${Date.now()}-${randomBytes(4).toString('hex')}`);
      await this.d.driver.checkpoint(handle, { dir: captureDir, leaveRunning: false });
      return { captureDir, defaults, source: base.source };
    } finally {
      if (handle) await this.d.driver.kill(handle).catch(() => undefined);
      await this.d.network.release(slot).catch(() => undefined);
    }
  }

  private async boot(
    spec: BuildSpec,
    resources: Resources,
    log: BuildLog,
    pinAs: string,
    net: { hostAddress: string; netnsPath: string },
  ): Promise<{ handle: SandboxHandle; defaults: SandboxDefaults; source: BuildResult['source'] }> {
    if (spec.fromImage) {
      log.info(`pulling ${spec.fromImage}`);
      const b = await this.d.images.prepare(spec.fromImage, {
        ...credentialsOf(spec),
        pinAs,
        log: (l) => log.info(l),
      });
      log.info('booting the build sandbox');
      const handle = await this.d.driver.start({ ...b.boot, resources, net });
      await this.d.envd(net.hostAddress, handle.envdPort).init({
        envVars: b.defaults.envVars ?? {},
        ...initDefaults(b.defaults),
        timestamp: new Date().toISOString(),
      });
      return {
        handle,
        defaults: b.defaults,
        source: { image: b.image.reference, digest: b.image.digest },
      };
    }
    const name = spec.fromTemplate!;
    log.info(`starting from template ${name}`);
    const t = await this.d.sources.resolve({ kind: 'template', name });
    try {
      const handle = t.capture
        ? await this.d.driver.restore({ capture: t.capture, resources, net })
        : await this.d.driver.start({ ...t.boot, resources, net });
      return { handle, defaults: t.sandboxDefaults ?? {}, source: { template: name } };
    } finally {
      t.release?.();
    }
  }

  /** Starts the start command, leaves it running, and polls the ready command until it succeeds. */
  private async start(envd: EnvdApi, spec: BuildSpec, state: BuildState, log: BuildLog): Promise<void> {
    const at = { user: state.user, envs: state.env, ...(state.workdir ? { cwd: state.workdir } : {}) };
    log.info(`start command: ${spec.startCmd}`);
    await envd.exec({ ...at, cmd: spec.startCmd!, detach: true });
    if (!spec.readyCmd) return;
    log.info(`waiting for the ready command: ${spec.readyCmd}`);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if ((await envd.exec({ ...at, cmd: spec.readyCmd, timeoutMs: 30_000 })) === 0) return;
      if (Date.now() > deadline)
        throw new StepError(
          spec.steps.length + 1,
          `the ready command did not succeed within ${READY_TIMEOUT_MS / 1000} s: ${spec.readyCmd}`,
        );
      await new Promise((r) => setTimeout(r, READY_INTERVAL_MS));
    }
  }
}

function credentialsOf(spec: BuildSpec): { credentials?: Credentials } {
  const r = spec.fromImageRegistry;
  if (!r) return {};
  if (r.type !== 'registry' || !r.username || !r.password)
    throw new StepError(0, `registry credentials of type '${r.type}' are not supported (only 'registry')`);
  return { credentials: { username: r.username, password: r.password } };
}

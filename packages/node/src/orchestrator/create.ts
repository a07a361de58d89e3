import { randomUUID } from 'node:crypto';
import { newSandboxId, withContext } from '@agentenv/common';
import type { EnvdInit } from '@agentenv/protocol';
import { initDefaults } from '../envd/index.js';
import type { EgressRules, NetSlot } from '../network/index.js';
import type { SandboxHandle, SandboxVolume } from '../runtime/index.js';
import { envdAccessToken, trafficAccessToken } from '../security/index.js';
import { isoTime } from '../util/index.js';
import type { Admission } from './admission.js';
import type { Live, SandboxCore } from './core.js';
import { SANDBOX_RECORD_VERSION, type SandboxRecord } from './record.js';
import type { ResolvedTemplate, SandboxSource } from './seams.js';
import type { SandboxWarmPool } from './warm-pool.js';

export interface CreateSandboxInput {
  source: SandboxSource;
  timeoutSecs: number;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  autoPause: boolean;
  /** The TTL pause keeps memory (true) or the filesystem only (false). */
  autoPauseMemory: boolean;
  autoResume: boolean;
  secure: boolean;
  egress: EgressRules;
  allowPublicTraffic: boolean;
  /** The Host proxied requests carry to the sandbox's servers (`${PORT}` filled in). */
  maskRequestHost?: string;
  /** Volumes to bind-mount read-write: the name and path shown, the host directory behind them. */
  volumeMounts?: readonly { name: string; path: string; hostPath: string }[];
}

/** New sandboxes: admitted, started from what their source resolves to, initialised. */
export class Creator {
  constructor(
    private readonly core: SandboxCore,
    private readonly admission: Admission,
  ) {}

  /** Admitted before its source is resolved: resolving may pull an image or build `base`. */
  async create(input: CreateSandboxInput): Promise<SandboxRecord> {
    const resources = input.source.kind === 'image' ? { resources: input.source.resources } : {};
    return this.admission.run({ kind: 'create', ...resources }, async () => {
      const template = await this.core.d.sources.resolve(input.source);
      // A warm sandbox was restored without volumes, and gVisor takes a sandbox's mounts once,
      // at restore: a create with volumes restores the ready state itself.
      const pool =
        !template.snapshotId && template.capture && !input.volumeMounts?.length
          ? this.core.d.pool
          : undefined;
      try {
        return await this.launch(template, input, { pool });
      } finally {
        // Refilled once this create has answered: a restore beside the handout takes the CPU that
        // the thaw and /init need (every request to the sandbox took ~30 ms instead of a few).
        pool?.fill(template);
        template.release?.();
      }
    });
  }

  /**
   * A fork's child: admitted on its own, so that a refused child leaves its siblings be. `slot`
   * gives it a network slot built ahead (called only once the child is admitted).
   */
  child(
    template: ResolvedTemplate,
    input: CreateSandboxInput,
    parentSandboxId: string,
    slot?: () => Promise<NetSlot>,
  ): Promise<SandboxRecord> {
    return this.admission.run({ kind: 'fork', resources: template.defaults }, () =>
      this.launch(template, input, { parentSandboxId, slot }),
    );
  }

  /** A new sandbox record from a template or snapshot, started and initialised. */
  private async launch(
    template: ResolvedTemplate,
    input: CreateSandboxInput,
    from: { pool?: SandboxWarmPool | undefined; parentSandboxId?: string; slot?: () => Promise<NetSlot> },
  ): Promise<SandboxRecord> {
    const { d, clock } = this.core;
    const t0 = clock.now();
    const rec = this.newRecord(template, input);
    const id = rec.sandboxId;
    d.store.insert(rec);
    return this.core.mutex.run(id, async () => {
      const taken: Partial<Live> = {};
      try {
        const { handle, slot } = await this.startInSlot(template, input, rec, from, taken);
        await d
          .envd(slot.hostAddress, handle.envdPort)
          .init(initFor(template, rec, clock.now(), input.volumeMounts), template.envdToken);
        this.core.live.set(id, { handle, slot });
        const running: SandboxRecord = { ...rec, state: 'running', handle };
        if (!d.store.compareAndSet(running, 'creating'))
          throw new Error('sandbox record changed during create');
        this.core.logs.add(id, `sandbox created from ${template.snapshotId ?? rec.templateId}`);
        this.core.activity.touch(id);
        d.observer.stage('create', clock.now() - t0);
        this.core.emit('created', id, 'request', {
          template_id: rec.templateId,
          ...(template.snapshotId ? { snapshot_id: template.snapshotId } : {}),
          ...(from.parentSandboxId ? { parent_sandbox_id: from.parentSandboxId } : {}),
        });
        return running;
      } catch (err) {
        this.core.live.delete(id);
        if (taken.handle) await d.driver.kill(taken.handle).catch(() => undefined);
        if (taken.slot) await this.core.releaseSlot(taken.slot, id);
        d.store.delete(id);
        this.core.failed('create', id, err);
        throw withContext(err, 'sandbox failed to start');
      }
    });
  }

  /**
   * A runtime sandbox for `rec`: a warm one from the pool, else a slot and a restore (or a cold
   * boot). What it took is recorded in `taken` as it goes, so a failure can give it back.
   */
  private async startInSlot(
    template: ResolvedTemplate,
    input: CreateSandboxInput,
    rec: SandboxRecord,
    from: { pool?: SandboxWarmPool | undefined; slot?: () => Promise<NetSlot> },
    taken: Partial<Live>,
  ): Promise<Live> {
    const { d } = this.core;
    const pooled = from.pool && (await this.fromPool(from.pool, template, rec, taken));
    if (pooled) return pooled;
    const volumes = sandboxVolumes(input.volumeMounts);
    // A slot built ahead that failed is built again here.
    const ahead = from.slot?.().catch(() => undefined);
    const slot = (taken.slot = (await ahead) ?? (await d.slots.acquire(rec.egress)));
    const common = { resources: template.defaults, net: slot, volumes };
    const handle: SandboxHandle = template.boot
      ? await d.driver.start({ ...template.boot, ...common })
      : await d.driver.restore({ capture: template.capture, ...common });
    taken.handle = handle;
    return { handle, slot };
  }

  /**
   * A waiting sandbox of the pool, thawed, with the create's egress rules. One that cannot be
   * thawed (it died while frozen: a frozen sandbox is looked at only now and then) is dropped,
   * and the create goes on without the pool.
   */
  private async fromPool(
    pool: SandboxWarmPool,
    template: ResolvedTemplate,
    rec: SandboxRecord,
    taken: Partial<Live>,
  ): Promise<Live | undefined> {
    const { d } = this.core;
    const pooled = pool.take(template);
    if (!pooled) return undefined;
    Object.assign(taken, pooled);
    const [thawed] = await Promise.all([
      d.driver.thaw(pooled.handle).then(
        () => true,
        (err: unknown) => {
          d.logger.warn({ err, sandboxId: rec.sandboxId }, 'thawing a pooled sandbox failed');
          return false;
        },
      ),
      d.slots.setEgress(pooled.slot, rec.egress),
    ]);
    if (thawed) return pooled;
    delete taken.handle;
    delete taken.slot;
    await d.driver.kill(pooled.handle).catch(() => undefined);
    await this.core.releaseSlot(pooled.slot, rec.sandboxId);
    return undefined;
  }

  private newRecord(template: ResolvedTemplate, input: CreateSandboxInput): SandboxRecord {
    const { nodeSecret } = this.core.d;
    const id = newSandboxId();
    const startedAt = isoTime(this.core.clock.now());
    // A fork's children have the parent's volumes: its capture carries them (and their binds).
    const shownMounts = input.volumeMounts?.length
      ? input.volumeMounts.map(({ name, path }) => ({ name, path }))
      : input.source.kind === 'fork'
        ? input.source.parent.volumeMounts
        : undefined;
    return {
      version: SANDBOX_RECORD_VERSION,
      sandboxId: id,
      templateId: template.templateId,
      ...(template.alias ? { alias: template.alias } : {}),
      state: 'creating',
      startedAt,
      filesSince: template.filesSince ?? startedAt,
      endAt: this.core.endIn(input.timeoutSecs),
      cpuCount: template.defaults.cpuCount,
      memoryMB: template.defaults.memoryMB,
      diskSizeMB: template.defaults.diskSizeMB,
      metadata: input.metadata,
      envVars: input.envVars,
      autoPause: input.autoPause,
      ...(input.autoPauseMemory ? {} : { autoPauseMemory: false }),
      autoResume: input.autoResume,
      secure: input.secure,
      ...(input.secure ? { envdAccessToken: envdAccessToken(nodeSecret, id) } : {}),
      egress: input.egress,
      allowPublicTraffic: input.allowPublicTraffic,
      ...(!input.allowPublicTraffic ? { trafficAccessToken: trafficAccessToken(nodeSecret, id) } : {}),
      ...(input.maskRequestHost ? { maskRequestHost: input.maskRequestHost } : {}),
      envdVersion: template.envdVersion,
      ...(shownMounts ? { volumeMounts: shownMounts } : {}),
    };
  }
}

/**
 * What envd is told at /init: the sandbox's ids, tokens, variables and defaults, and a boot id of
 * its own (every caller starts a sandbox fresh: a create, a fork child, a filesystem-only resume);
 * for a create with volumes, where to bind them.
 */
export function initFor(
  template: ResolvedTemplate,
  rec: SandboxRecord,
  now: number,
  volumes: readonly { name: string; path: string }[] = [],
): EnvdInit {
  return {
    envVars: {
      ...template.sandboxDefaults?.envVars,
      ...rec.envVars,
      E2B_SANDBOX: 'true',
      E2B_SANDBOX_ID: rec.sandboxId,
      E2B_TEMPLATE_ID: rec.templateId,
    },
    // Empty clears a token a snapshot's source had, for a sandbox that is not secure.
    accessToken: rec.envdAccessToken ?? '',
    // Absent for snapshots and forks: envd's state is in the capture, so they keep the
    // default user their source had.
    ...initDefaults(template.sandboxDefaults),
    timestamp: isoTime(now),
    bootId: randomUUID(),
    ...(volumes.length ? { volumeMounts: volumes.map(({ name, path }) => ({ name, path })) } : {}),
  };
}

/** Each volume once beneath the sandbox's volume mount point, however many paths show it. */
export function sandboxVolumes(mounts: CreateSandboxInput['volumeMounts'] = []): SandboxVolume[] {
  const byName = new Map(mounts.map((m) => [m.name, { name: m.name, hostPath: m.hostPath }]));
  return [...byName.values()];
}

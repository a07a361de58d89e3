import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import { conflict, invalid, notFound, newSandboxId, type Limiter } from '@agentenv/common';
import type { ResolvedTemplate } from '../orchestrator/index.js';
import { DEFAULT_RESOURCES, type Resources } from '../runtime/index.js';
import type { RuntimeCache, SnapshotRecord, SnapshotStore } from '@agentenv/snapshot';
import { BuildLog, StepError, type BuildResult, type BuildRunner, type BuildSpec } from './builds/index.js';
import type { SandboxDefaults } from './image-boot.js';

/** A built template as the snapshot repository records it (record meta `template`). */
export interface TemplateInfo {
  templateID: string;
  buildID: string;
  /** `name`, then `name:tag` for each tag: all resolve to this build. */
  names: string[];
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  createdAt: string;
  defaults: SandboxDefaults;
  source: BuildResult['source'];
}

export type BuildStatus = 'waiting' | 'building' | 'ready' | 'error';

interface Build {
  buildID: string;
  status: BuildStatus;
  log: BuildLog;
  reason?: { message: string; step?: string };
  triggered: boolean;
  createdAt: string;
  updatedAt: string;
}

/** A template this node registered (POST /v3/templates) and its builds. */
interface Registered {
  templateID: string;
  name: string;
  tags: string[];
  resources: Resources;
  createdAt: string;
  builds: Map<string, Build>;
}

/** Names of built templates in the repository's name space, apart from snapshot names. */
const ALIAS_PREFIX = 'template/';
const KIND = 'template';

const infoOf = (r: SnapshotRecord) => (r.meta as { template: TemplateInfo }).template;

/** `name:tag` → name and tag; a `:` before the last `/` belongs to a registry host. */
export function splitName(full: string): { name: string; tag?: string } {
  const colon = full.lastIndexOf(':');
  if (colon <= full.lastIndexOf('/')) return { name: full };
  return { name: full.slice(0, colon), tag: full.slice(colon + 1) };
}

/**
 * Templates built on this node or any node sharing the snapshot repository. A build's ready state
 * is stored like a snapshot (label kind `template`, names under `template/`), so every node sees
 * it and rebuilds it into its runtime cache on demand; builds in progress live on the node that
 * runs them. A source of the create chain (sources/): finds built templates by id, name or name:tag.
 */
export class BuiltTemplates {
  private readonly registered = new Map<string, Registered>();

  constructor(
    private readonly d: {
      store: SnapshotStore;
      cache: RuntimeCache;
      runner: Pick<BuildRunner, 'run'>;
      /** Builds that may run at once; the rest wait. */
      queue: Limiter;
      envdVersion: string;
      /** Templates the node has without a build (`base`), listed after the built ones. */
      builtin?: { info(): TemplateInfo | undefined };
      logger: Logger;
    },
  ) {}

  private async record(idOrName: string): Promise<SnapshotRecord | undefined> {
    const r = await this.d.store.resolve(ALIAS_PREFIX + idOrName).catch(() => null);
    return r && r.labels.kind === KIND ? r : undefined;
  }

  async find(idOrName: string): Promise<ResolvedTemplate | undefined> {
    const r = await this.record(idOrName);
    if (!r) return undefined;
    const info = infoOf(r);
    const { capture, release } = await this.d.cache.acquire(r.id);
    return {
      templateId: info.templateID,
      alias: splitName(info.names[0]!).name,
      capture,
      release,
      defaults: { cpuCount: info.cpuCount, memoryMB: info.memoryMB, diskSizeMB: info.diskSizeMB },
      envdVersion: info.envdVersion,
      // ENV is in the captured envd already; the user and workdir are set again at every /init.
      sandboxDefaults: {
        ...(info.defaults.user ? { user: info.defaults.user } : {}),
        ...(info.defaults.workdir ? { workdir: info.defaults.workdir } : {}),
      },
    };
  }

  /** POST /v3/templates: a new build of the template of that name (a new template if none). */
  async register(req: {
    name: string;
    tags?: string[];
    cpuCount?: number;
    memoryMB?: number;
  }): Promise<{ templateID: string; buildID: string; names: string[]; tags: string[]; aliases: string[] }> {
    const { name, tag } = splitName(req.name);
    const tags = [...new Set([...(tag ? [tag] : []), ...(req.tags ?? [])])];
    const known =
      [...this.registered.values()].find((t) => t.name === name) ??
      (await this.record(name).then((r) => (r ? { templateID: infoOf(r).templateID } : undefined)));
    const templateID = known?.templateID ?? newSandboxId();
    const now = new Date().toISOString();
    const entry: Registered = this.registered.get(templateID) ?? {
      templateID,
      name,
      tags,
      resources: DEFAULT_RESOURCES,
      createdAt: now,
      builds: new Map(),
    };
    entry.tags = tags;
    entry.resources = {
      cpuCount: req.cpuCount ?? DEFAULT_RESOURCES.cpuCount,
      memoryMB: req.memoryMB ?? DEFAULT_RESOURCES.memoryMB,
      diskSizeMB: DEFAULT_RESOURCES.diskSizeMB,
    };
    const buildID = randomUUID();
    entry.builds.set(buildID, {
      buildID,
      status: 'waiting',
      log: new BuildLog(),
      triggered: false,
      createdAt: now,
      updatedAt: now,
    });
    this.registered.set(templateID, entry);
    return { templateID, buildID, names: namesOf(entry), tags, aliases: [name] };
  }

  private build(templateID: string, buildID: string): { entry: Registered; build: Build } {
    const entry = this.registered.get(templateID);
    const build = entry?.builds.get(buildID);
    if (!entry || !build) throw notFound(`build ${buildID} of template ${templateID} not found on this node`);
    return { entry, build };
  }

  /** POST /v2/templates/{id}/builds/{buildID}: queues the build; it runs in the background. */
  trigger(templateID: string, buildID: string, spec: BuildSpec): void {
    const { entry, build } = this.build(templateID, buildID);
    if (build.triggered) throw conflict(`build ${buildID} was started already`);
    if (!!spec.fromImage === !!spec.fromTemplate)
      throw invalid('give exactly one of fromImage and fromTemplate');
    build.triggered = true;
    build.log.info(`build ${buildID} of ${entry.name} queued`);
    void this.d.queue
      .run(() => this.runBuild(entry, build, spec))
      .catch((err: unknown) => {
        const step = err instanceof StepError ? String(err.step) : undefined;
        const message = (err as Error).message;
        build.log.error(`build failed${step ? ` at step ${step}` : ''}: ${message}`);
        Object.assign(build, { status: 'error', reason: { message, ...(step ? { step } : {}) } });
        build.updatedAt = new Date().toISOString();
        this.d.logger.warn({ templateID, buildID, err }, 'template build failed');
      });
  }

  private async runBuild(entry: Registered, build: Build, spec: BuildSpec): Promise<void> {
    build.status = 'building';
    const t0 = Date.now();
    const result = await this.d.runner.run(spec, entry.resources, build.log, `template:${entry.templateID}`);
    try {
      build.log.info('storing the ready state in the snapshot repository');
      await this.store(entry, build, result);
    } finally {
      await rm(result.captureDir, { recursive: true, force: true });
    }
    build.status = 'ready';
    build.updatedAt = new Date().toISOString();
    build.log.info(`template ${entry.name} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  private async store(entry: Registered, build: Build, result: BuildResult): Promise<void> {
    const info: TemplateInfo = {
      templateID: entry.templateID,
      buildID: build.buildID,
      names: namesOf(entry),
      ...entry.resources,
      envdVersion: this.d.envdVersion,
      createdAt: new Date().toISOString(),
      defaults: result.defaults,
      source: result.source,
    };
    const stored = await this.d.store.storeCapture(result.captureDir, {
      labels: { kind: KIND, templateId: entry.templateID },
      meta: { template: info },
    });
    const repo = this.d.store.repository;
    for (const n of [entry.templateID, ...info.names])
      await repo.setAlias(ALIAS_PREFIX + n, stored.snapshotId);
    await this.d.cache.adopt(stored.snapshotId, result.captureDir);
    // Earlier builds no name points to any more are dropped.
    for (const old of await this.records(entry.templateID)) {
      if (old.id !== stored.snapshotId && (await repo.listAliases(old.id)).length === 0)
        await this.drop(old.id);
    }
  }

  private async drop(recordId: string): Promise<void> {
    await this.d.store.deleteSnapshot(recordId);
    await this.d.cache.remove(recordId).catch(() => undefined);
  }

  private records(templateID?: string): Promise<SnapshotRecord[]> {
    return this.d.store.listAll({
      labels: { kind: KIND, ...(templateID ? { templateId: templateID } : {}) },
    });
  }

  /** GET /templates/{id}/builds/{buildID}/status. */
  async status(templateID: string, buildID: string, logsOffset: number) {
    const build = this.registered.get(templateID)?.builds.get(buildID);
    if (build) {
      return {
        templateID,
        buildID,
        status: build.status,
        ...build.log.since(logsOffset),
        ...(build.reason ? { reason: { ...build.reason, logEntries: build.log.since(0).logEntries } } : {}),
      };
    }
    const stored = (await this.records(templateID)).find((r) => infoOf(r).buildID === buildID);
    if (!stored) throw notFound(`build ${buildID} of template ${templateID} not found`);
    return { templateID, buildID, status: 'ready' as BuildStatus, logEntries: [], logs: [] };
  }

  /** GET /templates: built templates (newest build of each) and those with builds under way here. */
  async list() {
    const seen = new Map<string, ReturnType<typeof templateBody>>();
    for (const r of await this.records()) {
      const info = infoOf(r);
      if (!seen.has(info.templateID))
        seen.set(info.templateID, templateBody(info, this.registered.get(info.templateID)));
    }
    for (const entry of this.registered.values())
      if (!seen.has(entry.templateID)) seen.set(entry.templateID, templateBody(undefined, entry));
    const builtin = this.d.builtin?.info();
    const named = (n: string) => [...seen.values()].some((t) => t.names.includes(n));
    if (builtin && !seen.has(builtin.templateID) && !named(builtin.names[0]!))
      seen.set(builtin.templateID, templateBody(builtin, undefined));
    return [...seen.values()];
  }

  /** GET /templates/{id} (id or name): the template with its builds; undefined when unknown. */
  async get(idOrName: string) {
    const r = await this.record(idOrName);
    const entry =
      this.registered.get(r ? infoOf(r).templateID : idOrName) ??
      [...this.registered.values()].find((t) => t.name === idOrName);
    if (!r && !entry) return undefined;
    return templateBody(r ? infoOf(r) : undefined, entry);
  }

  /**
   * POST /templates/tags: points `name:tag` for each tag at the build `target` (`name` or
   * `name:tag`) resolves to. A build a tag points to is kept when the template is rebuilt.
   */
  async assignTags(target: string, tags: string[]): Promise<{ buildID: string; tags: string[] }> {
    const r = await this.record(target);
    if (!r) throw notFound(`template ${target} not found`);
    const { name } = splitName(target);
    for (const tag of tags) await this.d.store.repository.setAlias(`${ALIAS_PREFIX}${name}:${tag}`, r.id);
    return { buildID: infoOf(r).buildID, tags };
  }

  /** DELETE /templates/tags: removes `name:tag` names; unknown tags are fine, an unknown template is not. */
  async removeTags(name: string, tags: string[]): Promise<void> {
    if (!(await this.record(name))) throw notFound(`template ${name} not found`);
    for (const tag of tags) await this.d.store.repository.deleteAlias(`${ALIAS_PREFIX}${name}:${tag}`);
  }

  /** GET /templates/{id}/tags: the tags of every stored build of the template. */
  async tags(idOrName: string): Promise<{ tag: string; buildID: string; createdAt: string }[]> {
    const r = await this.record(idOrName);
    if (!r) throw notFound(`template ${idOrName} not found`);
    const { templateID, names } = infoOf(r);
    const prefix = `${ALIAS_PREFIX}${splitName(names[0]!).name}:`;
    const out: { tag: string; buildID: string; createdAt: string }[] = [];
    for (const build of await this.records(templateID)) {
      for (const a of await this.d.store.repository.listAliases(build.id)) {
        if (a.name.startsWith(prefix))
          out.push({
            tag: a.name.slice(prefix.length),
            buildID: infoOf(build).buildID,
            createdAt: build.createdAt,
          });
      }
    }
    return out.sort((a, b) => a.tag.localeCompare(b.tag));
  }

  /** DELETE /templates/{id}: every stored build and its names; false when unknown. */
  async delete(idOrName: string): Promise<boolean> {
    const found = await this.get(idOrName);
    if (!found) return false;
    // Deleting a record drops the names pointing to it.
    for (const r of await this.records(found.templateID)) await this.drop(r.id);
    this.registered.delete(found.templateID);
    return true;
  }
}

function namesOf(entry: Registered): string[] {
  return [entry.name, ...entry.tags.map((t) => `${entry.name}:${t}`)];
}

/** E2B's Template (list) / TemplateWithBuilds (get) body. */
function templateBody(info: TemplateInfo | undefined, entry: Registered | undefined) {
  const builds = [...(entry?.builds.values() ?? [])].map((b) => ({
    buildID: b.buildID,
    status: b.status,
    createdAt: b.createdAt,
    updatedAt: b.updatedAt,
  }));
  if (info && !builds.some((b) => b.buildID === info.buildID))
    builds.push({
      buildID: info.buildID,
      status: 'ready',
      createdAt: info.createdAt,
      updatedAt: info.createdAt,
    });
  const latest = builds.reduce<(typeof builds)[number] | undefined>(
    (a, b) => (!a || b.createdAt > a.createdAt ? b : a),
    undefined,
  );
  const names = info?.names ?? (entry ? namesOf(entry) : []);
  const resources = info ?? entry!.resources;
  return {
    templateID: info?.templateID ?? entry!.templateID,
    buildID: latest?.buildID ?? '',
    buildStatus: latest?.status ?? 'waiting',
    cpuCount: resources.cpuCount,
    memoryMB: resources.memoryMB,
    diskSizeMB: resources.diskSizeMB,
    envdVersion: info?.envdVersion ?? '',
    public: false,
    aliases: [splitName(names[0] ?? '').name],
    names,
    createdAt: entry?.createdAt ?? info!.createdAt,
    updatedAt: latest?.updatedAt ?? info!.createdAt,
    createdBy: null,
    lastSpawnedAt: null,
    spawnCount: 0,
    buildCount: builds.length,
    builds,
  };
}

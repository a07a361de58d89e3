import { createRequire } from 'node:module';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { invalid } from '../errors.js';
import { ensureTemplate, type Template } from '../image/template.js';
import type { NetworkManager } from '../network/manager.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { ResolvedTemplate, TemplateCatalog } from '../orchestrator/seams.js';
import type { TemplateInfo } from './built.js';

/** The envd tools bundle shipped with @agentenv/envd (built by `npm run bundle -w @agentenv/envd`). */
export function defaultToolsDir(): string {
  const pkg = createRequire(import.meta.url).resolve('@agentenv/envd/package.json');
  return path.join(path.dirname(pkg), 'dist-tools');
}

const DEFAULT_RESOURCES = { cpuCount: 2, memoryMB: 1024, diskSizeMB: 2048 };

/**
 * Templates this node can start sandboxes from. For now the built-in `base` template, built on
 * first use (Debian root filesystem + ready-state capture) and cached under $AENV_HOME.
 */
export class BuiltinTemplates implements TemplateCatalog {
  private base: Promise<Template> | undefined;
  private ready: Template | undefined;
  private version: string | undefined;
  private readonly stopping = new AbortController();

  constructor(
    private readonly opts: {
      home: string;
      driver: RuntimeDriver;
      network: NetworkManager;
      toolsDir: string;
      logger: Logger;
    },
  ) {}

  /** Starts building `base` if it is not cached yet; creates wait for the same build. */
  prepare(): Promise<Template> {
    this.base ??= this.buildBase().then(async (t) => {
      this.version = await envdVersion(this.opts.toolsDir);
      return (this.ready = t);
    });
    // A failed build is retried by the next create instead of being remembered forever.
    this.base.catch(() => (this.base = undefined));
    return this.base;
  }

  /** Node shutdown: stops a build under way and waits until it has cleaned up. */
  async close(): Promise<void> {
    this.stopping.abort();
    await this.base?.catch(() => undefined);
  }

  private async buildBase(): Promise<Template> {
    const slot = await this.opts.network.acquire();
    const log = this.opts.logger.child({ template: 'base' });
    try {
      return await ensureTemplate({
        home: this.opts.home,
        driver: this.opts.driver,
        toolsDir: this.opts.toolsDir,
        net: slot,
        log: { info: (m: string) => log.info(m), warn: (m: string) => log.warn(m) },
        signal: this.stopping.signal,
      });
    } finally {
      await this.opts.network.release(slot);
    }
  }

  /** `base` as the template catalogue lists it, once its ready state exists. */
  info(): TemplateInfo | undefined {
    if (!this.ready || !this.version) return undefined;
    return {
      templateID: 'base',
      buildID: this.ready.key,
      names: ['base'],
      ...DEFAULT_RESOURCES,
      envdVersion: this.version,
      createdAt: this.ready.capture.meta.createdAt,
      defaults: { user: 'user' },
      source: {},
    };
  }

  async resolve(templateId: string): Promise<ResolvedTemplate> {
    if (templateId !== 'base') throw invalid(`template '${templateId}' not found`);
    const t = await this.prepare();
    return {
      templateId: 'base',
      alias: 'base',
      capture: t.capture,
      defaults: DEFAULT_RESOURCES,
      sandboxDefaults: { user: 'user' },
      envdVersion: await envdVersion(this.opts.toolsDir),
    };
  }
}

/** The envd version the tools bundle's manifest names. */
export async function envdVersion(toolsDir: string): Promise<string> {
  const manifest = JSON.parse(await readFile(path.join(toolsDir, 'manifest.json'), 'utf8')) as {
    envdVersion?: string;
  };
  return manifest.envdVersion ?? '0.6.4';
}

import type { Logger } from 'pino';
import { envdVersion } from '../envd/index.js';
import type { NetworkManager } from '../network/index.js';
import type { ResolvedTemplate } from '../orchestrator/index.js';
import { DEFAULT_RESOURCES, type RuntimeDriver } from '../runtime/index.js';
import { ensureTemplate, type Template, type TemplateInfo } from '../templates/index.js';
import type { NamedSource } from './chain.js';

/**
 * The `base` template every node has: built on first use (Debian root filesystem + ready-state
 * capture) and cached under $AENV_HOME.
 */
export class BaseTemplate implements NamedSource {
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

  async find(name: string): Promise<ResolvedTemplate | undefined> {
    if (name !== 'base') return undefined;
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

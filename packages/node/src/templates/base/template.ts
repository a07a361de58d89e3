import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { silentLog, type Log } from '@agentenv/common';
import { ENVD_PORT } from '@agentenv/protocol';
import { readCapture } from '@agentenv/snapshot';
import { envdInitArgs, ensureToolsLayer, loadToolsBundle, TOOLS_SANDBOX_PATH } from '../../envd/index.js';
import { ImageBuildError, LayerStore } from '@agentenv/oci';
import {
  DEFAULT_RESOURCES,
  type Capture,
  type InitProcess,
  type ReadOnlyMount,
  type Resources,
  type RuntimeDriver,
  type SandboxNet,
  unmountBelow,
} from '../../runtime/index.js';
import { BASE_RECIPE, readyStateKey, recipeHash, type RootfsRecipe } from './recipe.js';
import { buildDebianRootfs } from './rootfs-build.js';

/** A template ready to be instantiated: creating a sandbox is `driver.restore({capture})`. */
export interface Template {
  readonly name: string;
  /** Cache key of the ready state: rootfs recipe + tools bundle + runtime build. */
  readonly key: string;
  readonly layers: readonly string[];
  readonly mounts: readonly ReadOnlyMount[];
  readonly init: InitProcess;
  readonly envdPort: number;
  readonly defaultUser: string;
  readonly capture: Capture;
  /** Set when this call built something, in milliseconds (rootfs, ready state). */
  readonly built?: { readonly rootfsMs?: number; readonly readyMs?: number };
}

export interface EnsureTemplateOptions {
  /** $AENV_HOME: layers/ and templates/ live under it. */
  readonly home: string;
  readonly driver: RuntimeDriver;
  /** The envd tools bundle directory (packages/envd/dist-tools). */
  readonly toolsDir: string;
  /** The network of the one sandbox booted to capture the ready state. */
  readonly net: SandboxNet;
  readonly recipe?: RootfsRecipe;
  readonly name?: string;
  /** Resources of the capturing boot; every restore sets its own. */
  readonly resources?: Resources;
  readonly log?: Log;
  /** Stops a root filesystem build under way (the node is shutting down). */
  readonly signal?: AbortSignal;
}

const TEMPLATE_FILE = 'template.json';
const CAPTURE_DIR = 'capture';

const inFlight = new Map<string, Promise<Template>>();

/**
 * Returns the template, building what is missing: the root filesystem layer (keyed by the
 * recipe), an immutable copy of the tools bundle (keyed by its content hash), and the ready state
 * (a capture of a sandbox whose envd answers /health). Each is built in a temporary directory and
 * renamed into place, so an interrupted build leaves nothing that a later call would trust.
 */
export async function ensureTemplate(opts: EnsureTemplateOptions): Promise<Template> {
  const probe = await opts.driver.probe();
  if (!probe.available) throw new ImageBuildError(`runtime ${opts.driver.name} unavailable: ${probe.reason}`);
  const tools = await loadToolsBundle(opts.toolsDir);
  const recipe = opts.recipe ?? BASE_RECIPE;
  const rootfsId = recipeHash(recipe);
  const key = readyStateKey({
    rootfs: rootfsId,
    tools: tools.hash,
    runtime: `${opts.driver.name}@${probe.version}`,
  });
  const existing = inFlight.get(key);
  if (existing) return existing;
  const p = build(opts, recipe, rootfsId, key, tools).finally(() => inFlight.delete(key));
  inFlight.set(key, p);
  return p;
}

async function build(
  opts: EnsureTemplateOptions,
  recipe: RootfsRecipe,
  rootfsId: string,
  key: string,
  tools: Awaited<ReturnType<typeof loadToolsBundle>>,
): Promise<Template> {
  const log = opts.log ?? silentLog;
  const name = opts.name ?? 'base';
  const layers = new LayerStore(join(opts.home, 'layers'), { unmountBelow });
  const dir = join(opts.home, 'templates', key);

  const cached = await loadTemplate(dir);
  if (cached) return cached;

  let rootfsMs: number | undefined;
  if (!(await layers.has(rootfsId))) {
    log.info(`template ${name}: building root filesystem ${rootfsId.slice(0, 12)} (takes a minute or two)`);
    const t = Date.now();
    await layers.ensure(rootfsId, { kind: 'mmdebstrap', recipe }, (target) =>
      buildDebianRootfs(recipe, target, log, opts.signal),
    );
    rootfsMs = Date.now() - t;
  }
  const template: TemplateFile = {
    name,
    key,
    layers: [layers.rootfs(rootfsId)],
    mounts: [{ hostPath: await ensureToolsLayer(layers, tools), sandboxPath: TOOLS_SANDBOX_PATH }],
    init: { args: envdInitArgs(tools, ENVD_PORT) },
    envdPort: ENVD_PORT,
    defaultUser: recipe.user.name,
  };

  log.info(`template ${name}: booting a sandbox to capture the ready state`);
  const t = Date.now();
  await captureReadyState(opts, template, dir);
  const readyMs = Date.now() - t;
  log.info(`template ${name}: ready state captured in ${readyMs} ms`);
  const made = await loadTemplate(dir);
  if (!made) throw new ImageBuildError(`template ${name}: ${dir} is unreadable after building it`);
  return { ...made, built: { ...(rootfsMs !== undefined ? { rootfsMs } : {}), readyMs } };
}

/** What template.json holds beside the capture. */
interface TemplateFile {
  name: string;
  key: string;
  layers: string[];
  mounts: ReadOnlyMount[];
  init: InitProcess;
  envdPort: number;
  defaultUser: string;
}

/**
 * Boots the template once and checkpoints it as soon as envd answers, into a temporary directory
 * renamed to `dir` when complete (a concurrent build that got there first wins).
 */
async function captureReadyState(opts: EnsureTemplateOptions, template: TemplateFile, dir: string) {
  const { name, key } = template;
  const tmp = join(opts.home, 'templates', `.tmp-${key}-${randomBytes(4).toString('hex')}`);
  await mkdir(tmp, { recursive: true });
  const t = Date.now();
  const handle = await opts.driver
    .start({
      layers: template.layers,
      resources: opts.resources ?? DEFAULT_RESOURCES,
      init: template.init,
      mounts: template.mounts,
      net: opts.net,
      envdPort: template.envdPort,
    })
    .catch(async (e: unknown) => {
      await rm(tmp, { recursive: true, force: true });
      throw new ImageBuildError(
        `template ${name}: the boot sandbox failed: ${(e as Error).message}`,
        undefined,
        {
          cause: e,
        },
      );
    });
  try {
    (opts.log ?? silentLog).info(`template ${name}: envd healthy after ${Date.now() - t} ms; checkpointing`);
    await opts.driver.checkpoint(handle, { dir: join(tmp, CAPTURE_DIR), leaveRunning: false });
    await writeFile(join(tmp, TEMPLATE_FILE), JSON.stringify(template, null, 2));
    await mkdir(join(opts.home, 'templates'), { recursive: true });
    await rename(tmp, dir).catch(async (e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOTEMPTY' && e.code !== 'EEXIST') throw e;
    });
  } catch (e) {
    throw new ImageBuildError(
      `template ${name}: capturing the ready state failed: ${(e as Error).message}`,
      undefined,
      { cause: e },
    );
  } finally {
    await opts.driver.kill(handle).catch(() => undefined);
    await rm(tmp, { recursive: true, force: true });
  }
}

/** A committed template, or null if absent or damaged (it is then rebuilt). */
async function loadTemplate(dir: string): Promise<Template | null> {
  if (
    !(await stat(join(dir, TEMPLATE_FILE)).then(
      () => true,
      () => false,
    ))
  )
    return null;
  try {
    const t = JSON.parse(await readFile(join(dir, TEMPLATE_FILE), 'utf8')) as Omit<Template, 'capture'>;
    const capture = await readCapture(join(dir, CAPTURE_DIR));
    for (const p of [...t.layers, ...t.mounts.map((m) => m.hostPath)]) {
      if (
        !(await stat(p).then(
          () => true,
          () => false,
        ))
      )
        throw new Error(`missing ${p}`);
    }
    return { ...t, capture };
  } catch {
    await rm(dir, { recursive: true, force: true });
    return null;
  }
}

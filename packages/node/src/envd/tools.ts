import { cp, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { packageDir } from '@agentenv/common';
import { ENVD_PORT } from '@agentenv/protocol';
import { ImageBuildError, type LayerStore } from '@agentenv/oci';

/** Where the tools bundle (envd and its private runtime) appears inside every sandbox, read-only. */
export const TOOLS_SANDBOX_PATH = '/opt/aenv-tools';

/** The envd tools bundle built by `npm run bundle -w @agentenv/envd` (dist-tools/). */
export interface ToolsBundle {
  readonly dir: string;
  /** manifest.json's contentHash: changes whenever any file of the bundle changes. */
  readonly hash: string;
  /** Launcher path relative to the bundle root (a shell script that starts envd). */
  readonly launcher: string;
}

/** Reads dist-tools/manifest.json; a missing or unreadable bundle is an ImageBuildError saying how to build it. */
export async function loadToolsBundle(dir: string): Promise<ToolsBundle> {
  let manifest: { contentHash?: unknown; entry?: { launcher?: unknown } };
  try {
    manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as typeof manifest;
  } catch (e) {
    throw new ImageBuildError(
      `no envd tools bundle at ${dir} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): run \`npm run bundle -w @agentenv/envd\``,
    );
  }
  if (typeof manifest.contentHash !== 'string' || !manifest.contentHash) {
    throw new ImageBuildError(`${dir}/manifest.json has no contentHash`);
  }
  const launcher = typeof manifest.entry?.launcher === 'string' ? manifest.entry.launcher : 'bin/envd';
  if (
    !(await stat(join(dir, launcher)).then(
      (s) => s.isFile(),
      () => false,
    ))
  ) {
    throw new ImageBuildError(`tools bundle ${dir} lacks its launcher ${launcher}`);
  }
  return { dir, hash: manifest.contentHash, launcher };
}

/** envd as the sandbox's first process, started from the read-only tools mount. */
export function envdInitArgs(bundle: ToolsBundle, port = ENVD_PORT): string[] {
  return [`${TOOLS_SANDBOX_PATH}/${bundle.launcher}`, '--port', String(port)];
}

/**
 * An immutable copy of the bundle in the node's layer store (keyed by its content hash), to mount
 * into sandboxes: captures name host paths, and dist-tools may be rebuilt under them.
 */
export function ensureToolsLayer(layers: LayerStore, bundle: ToolsBundle): Promise<string> {
  const id = `tools-${bundle.hash.replace(/^sha256[:-]/, '')}`;
  return layers.ensure(id, { kind: 'envd-tools', hash: bundle.hash }, (target) =>
    cp(bundle.dir, target, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true }),
  );
}

/** The envd tools bundle shipped with @agentenv/envd (built by `npm run bundle -w @agentenv/envd`). */
export function defaultToolsDir(): string {
  return join(packageDir('@agentenv/envd', import.meta.url), 'dist-tools');
}

/** The envd version the tools bundle's manifest names. */
export async function envdVersion(toolsDir: string): Promise<string> {
  const manifest = JSON.parse(await readFile(join(toolsDir, 'manifest.json'), 'utf8')) as {
    envdVersion?: string;
  };
  return manifest.envdVersion ?? '0.6.4';
}

import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type IConfiguration } from 'dependency-cruiser';
import { afterAll, describe, expect, it } from 'vitest';

// `npm run lint` runs dependency-cruiser with the repository's rule file over packages/*/src. Here
// the same rules judge small planted trees, so a rule that stopped matching would show.

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const dirs: string[] = [];

async function rules(): Promise<IConfiguration> {
  const file = path.join(ROOT, '.dependency-cruiser.mjs');
  return ((await import(file)) as { default: IConfiguration }).default;
}

/**
 * Writes `files` (path → source) into a fresh directory, links each of `packages` (names under
 * packages/) into its node_modules as @agentenv/<name>, as npm's workspaces do, and names what
 * the rules refuse there.
 */
async function violations(files: Record<string, string>, packages: string[] = []): Promise<string[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'aenv-deprules-'));
  dirs.push(dir);
  for (const [file, source] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), source);
  }
  mkdirSync(path.join(dir, 'node_modules/@agentenv'), { recursive: true });
  for (const name of packages) {
    symlinkSync(path.join(dir, 'packages', name), path.join(dir, 'node_modules/@agentenv', name));
  }
  const config = await rules();
  // The rules' paths are relative to the base directory, as they are to the root for lint.
  const result = await cruise(['packages'], {
    ...config.options,
    baseDir: dir,
    ruleSet: { forbidden: config.forbidden ?? [] },
    validate: true,
  });
  if (typeof result.output === 'string') throw new Error('expected a cruise result');
  return result.output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
}

/** A workspace package `name` whose entry (src/index.ts, by its exports' `source`) is `source`. */
function workspacePackage(name: string, source: string): Record<string, string> {
  const exports = { '.': { source: './src/index.ts' } };
  return {
    [`packages/${name}/package.json`]: JSON.stringify({ name: `@agentenv/${name}`, type: 'module', exports }),
    [`packages/${name}/src/index.ts`]: source,
  };
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// A cruise loads TypeScript's parser: seconds on a busy machine, more than a unit test's default.
describe('dependency rules', { timeout: 60_000 }, () => {
  it('accept the layering CONTRIBUTING states', async () => {
    const found = await violations(
      {
        'packages/node/src/api/routes.ts': `import { create } from '../orchestrator/index.js';\nexport const r = create;\n`,
        'packages/node/src/orchestrator/index.ts': `import { start } from '../runtime/index.js';\nimport { put } from '@agentenv/snapshot';\nexport const create = [start, put];\n`,
        'packages/node/src/runtime/index.ts': `import { id } from '../util/index.js';\nimport { put } from '@agentenv/snapshot';\nexport const start = [id, put];\n`,
        'packages/node/src/util/index.ts': `export const id = 1;\n`,
        'packages/node/src/templates/index.ts': `import { pull } from '@agentenv/oci';\nimport { start } from '../runtime/index.js';\nexport const boot = [pull, start];\n`,
        'packages/node/src/wiring/index.ts': `import { serve } from '@agentenv/p2p';\nexport const exchange = serve;\n`,
        ...workspacePackage('snapshot', `import { c } from '@agentenv/common';\nexport const put = c;\n`),
        ...workspacePackage('oci', `import { c } from '@agentenv/common';\nexport const pull = c;\n`),
        ...workspacePackage(
          'p2p',
          `import { c } from '@agentenv/common';\nimport { put } from '@agentenv/snapshot';\nexport const serve = [c, put];\n`,
        ),
        ...workspacePackage('common', `export const c = 1;\n`),
      },
      ['snapshot', 'oci', 'p2p', 'common'],
    );
    expect(found).toEqual([]);
  });

  it('refuse an import cycle', async () => {
    const found = await violations({
      'packages/gateway/src/a.ts': `import { b } from './b.js';\nexport const a = () => b;\n`,
      'packages/gateway/src/b.ts': `import type { a } from './a.js';\nexport const b: typeof a | 1 = 1;\n`,
    });
    expect(found).toContain('no-circular: packages/gateway/src/a.ts → packages/gateway/src/b.ts');
  });

  it('refuse a lower layer importing the orchestrator or the API, and the orchestrator the API', async () => {
    const found = await violations({
      'packages/node/src/runtime/index.ts': `import { o } from '../orchestrator/index.js';\nexport const r = o;\n`,
      'packages/node/src/network/index.ts': `import { a } from '../api/index.js';\nexport const n = a;\n`,
      'packages/node/src/orchestrator/index.ts': `import { a } from '../api/index.js';\nexport const o = a;\n`,
      'packages/node/src/api/index.ts': `export const a = 1;\n`,
    });
    expect(found).toEqual(
      expect.arrayContaining([
        'node-layers-below-orchestrator: packages/node/src/runtime/index.ts → packages/node/src/orchestrator/index.ts',
        'node-layers-below-orchestrator: packages/node/src/network/index.ts → packages/node/src/api/index.ts',
        'node-orchestrator-below-api: packages/node/src/orchestrator/index.ts → packages/node/src/api/index.ts',
      ]),
    );
  });

  it('refuse the libraries beneath the node importing it, or one another', async () => {
    const found = await violations(
      {
        ...workspacePackage('snapshot', `import { n } from '@agentenv/node';\nexport const s = n;\n`),
        ...workspacePackage(
          'oci',
          `import { n } from '@agentenv/node';\nimport { s } from '@agentenv/snapshot';\nexport const o = [n, s];\n`,
        ),
        ...workspacePackage(
          'p2p',
          `import { n } from '@agentenv/node';\nimport { o } from '@agentenv/oci';\nexport const p = [n, o];\n`,
        ),
        ...workspacePackage('node', `export const n = 1;\n`),
      },
      ['snapshot', 'oci', 'p2p', 'node'],
    );
    expect(found.sort()).toEqual([
      'library-imports: packages/oci/src/index.ts → packages/node/src/index.ts',
      'library-imports: packages/oci/src/index.ts → packages/snapshot/src/index.ts',
      'library-imports: packages/snapshot/src/index.ts → packages/node/src/index.ts',
      'p2p-imports: packages/p2p/src/index.ts → packages/node/src/index.ts',
      'p2p-imports: packages/p2p/src/index.ts → packages/oci/src/index.ts',
    ]);
  });

  it("keep the envd client off aenv's start: import() or a type-only import only", async () => {
    const found = await violations(
      {
        'node_modules/@connectrpc/connect/package.json': JSON.stringify({
          name: '@connectrpc/connect',
          main: 'index.js',
        }),
        'node_modules/@connectrpc/connect/index.js': `export const ConnectError = 1;\n`,
        ...workspacePackage('protocol', `export const Signal = 1;\n`),
        'packages/cli/src/client/envd.ts': `import { ConnectError } from '@connectrpc/connect';\nimport { Signal } from '@agentenv/protocol';\nexport const x = [ConnectError, Signal];\n`,
        'packages/cli/src/remote/exec.ts': `import { x } from '../client/envd.js';\nexport type Options = { a: 1 };\nexport const run = x;\n`,
        'packages/cli/src/commands/lazy.ts': `import type { Options } from '../remote/exec.js';\nexport const go = async (o: Options) => (await import('../remote/exec.js')).run ?? o;\n`,
        'packages/cli/src/commands/eager.ts': `import { run } from '../remote/exec.js';\nexport const go = run;\n`,
        'packages/cli/src/commands/connect.ts': `import { ConnectError } from '@connectrpc/connect';\nimport { Signal } from '@agentenv/protocol';\nexport const e = [ConnectError, Signal];\n`,
        'packages/cli/src/lib/through.ts': `import { x } from '../client/envd.js';\nexport const t = x;\n`,
      },
      ['protocol'],
    );
    expect(found.sort()).toEqual([
      'cli-start-without-connect: packages/cli/src/commands/connect.ts → node_modules/@connectrpc/connect/index.js',
      'cli-start-without-connect: packages/cli/src/commands/connect.ts → packages/protocol/src/index.ts',
      'cli-start-without-connect: packages/cli/src/commands/eager.ts → packages/cli/src/remote/exec.ts',
      'cli-start-without-connect: packages/cli/src/lib/through.ts → packages/cli/src/client/envd.ts',
    ]);
  });

  it('refuse a relative import into another package', async () => {
    const found = await violations({
      'packages/gateway/src/index.ts': `import { x } from '../../node/src/index.js';\nexport const g = x;\n`,
      'packages/node/src/index.ts': `export const x = 1;\n`,
    });
    expect(found).toEqual([
      'no-relative-import-across-packages: packages/gateway/src/index.ts → packages/node/src/index.ts',
    ]);
  });
});

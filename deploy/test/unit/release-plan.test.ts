import { describe, expect, it } from 'vitest';
import { prunedAway } from '../../release/files.js';
import { LockfileError, productionClosure, resolveLocation, type Lockfile } from '../../release/lockfile.js';
import { planRelease, PlanError, type WorkspaceManifest } from '../../release/workspaces.js';

const lock: Lockfile = {
  lockfileVersion: 3,
  packages: {
    '': { name: 'root' },
    'packages/node': { name: '@x/node', dependencies: { fastify: '5', sqlite: '1' } },
    'packages/gateway': { name: '@x/gateway', dependencies: { '@x/node': '0.1.0', pino: '1' } },
    'packages/cli': { name: '@x/cli', dependencies: { commander: '14' } },
    'node_modules/@x/node': { link: true, resolved: 'packages/node' },
    'node_modules/fastify': { dependencies: { pino: '2' }, optionalDependencies: { 'fsevents-like': '1' } },
    'node_modules/fastify/node_modules/pino': { version: '2.0.0' },
    'node_modules/pino': { version: '1.0.0' },
    'node_modules/sqlite': {
      peerDependencies: { bindings: '1', extra: '1' },
      peerDependenciesMeta: { extra: { optional: true } },
    },
    'node_modules/bindings': {},
    'node_modules/commander': {},
    'node_modules/vitest': { dev: true },
  },
};

describe('release: production closure from package-lock.json', () => {
  it('resolves like Node: nearest node_modules first, then the parents', () => {
    expect(resolveLocation(lock, 'node_modules/fastify', 'pino')).toBe(
      'node_modules/fastify/node_modules/pino',
    );
    expect(resolveLocation(lock, 'packages/gateway', 'pino')).toBe('node_modules/pino');
    expect(resolveLocation(lock, 'packages/gateway', 'nothing')).toBeUndefined();
  });

  it('follows dependencies, optional ones and required peers, through workspace links, and nothing else', () => {
    expect(productionClosure(lock, ['packages/gateway'])).toEqual({
      modules: [
        'node_modules/bindings',
        'node_modules/fastify',
        'node_modules/fastify/node_modules/pino',
        'node_modules/pino',
        'node_modules/sqlite',
      ],
      workspaces: ['packages/gateway', 'packages/node'],
    });
  });

  it('refuses a lockfile that lacks a required dependency, or is too old', () => {
    const broken = {
      ...lock,
      packages: { ...lock.packages, 'node_modules/bindings': undefined },
    } as unknown as Lockfile;
    expect(() => productionClosure(broken, ['packages/node'])).toThrow(
      /"bindings" \(needed by node_modules\/sqlite\)/,
    );
    expect(() => productionClosure({ lockfileVersion: 1, packages: {} }, [])).toThrow(LockfileError);
  });
});

const ws = (location: string, extra: Partial<WorkspaceManifest>): WorkspaceManifest => ({
  location,
  name: `@x/${location.split('/')[1]}`,
  version: '0.1.0',
  bin: {},
  scripts: {},
  hasToolsBundle: false,
  ...extra,
});

describe('release: what each workspace contributes', () => {
  const tools = ws('packages/envd', { bin: { 'aenv-envd': 'bin/envd.js' }, hasToolsBundle: true });
  const cli = ws('packages/cli', { bin: { aenv: 'bin/aenv.js' }, scripts: { bundle: 'node b.mjs' } });
  const node = ws('packages/node', { bin: { 'aenv-server': 'bin/aenv-server.js' } });
  const lib = ws('packages/protocol', {});

  it('ships every aenv-* command of a package that is neither the tools bundle nor the CLI', () => {
    const gateway = ws('packages/gateway', { bin: { 'aenv-gateway': 'bin/gw.js', helper: 'x.js' } });
    const plan = planRelease([lib, tools, node, cli, gateway]);
    expect(plan.tools).toBe(tools);
    expect(plan.cli).toBe(cli);
    expect(plan.services.map((s) => [s.pkg.name, s.commands])).toEqual([
      ['@x/node', { 'aenv-server': 'bin/aenv-server.js' }],
      ['@x/gateway', { 'aenv-gateway': 'bin/gw.js' }],
    ]);
  });

  it('says what is missing: an unbuilt tools bundle, a CLI without a bundle script, a command twice', () => {
    expect(() => planRelease([{ ...tools, hasToolsBundle: false }, cli, node])).toThrow(/npm run build/);
    expect(() => planRelease([tools, { ...cli, scripts: {} }, node])).toThrow(/no "bundle" script/);
    expect(() => planRelease([tools, cli, node, { ...node, location: 'packages/n2' }])).toThrow(PlanError);
  });

  it('prunes compiler objects and other platforms’ prebuilt binaries only', () => {
    expect(prunedAway('build/Release/obj.target/x.o', 'linux-x64')).toBe(true);
    expect(prunedAway('build/Release/better_sqlite3.node', 'linux-x64')).toBe(false);
    expect(prunedAway('prebuilds/win32-x64/pty.node', 'linux-x64')).toBe(true);
    expect(prunedAway('prebuilds/linux-x64/pty.node', 'linux-x64')).toBe(false);
    expect(prunedAway('lib/index.js', 'linux-x64')).toBe(false);
  });
});

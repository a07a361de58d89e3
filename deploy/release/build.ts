import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, cp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { copyBuilt, copyModule, linkOrCopy, sha256File, totalSize, writeChecksums } from './files.js';
import { productionClosure, type Lockfile } from './lockfile.js';
import { CLI_COMMAND, planRelease, type ReleasePlan, type WorkspaceManifest } from './workspaces.js';

/**
 * Assembles `aenv-<version>-linux-<arch>/` and packs it. Layout (what install.sh, the images and
 * the units rely on):
 *   bin/<command>      launchers (aenv-server, aenv-scheduler, aenv-gateway, …, aenv)
 *   node/bin/node      the Node.js the native modules were built against
 *   app/               an npm workspace root: package.json, node_modules/, packages/<name>/
 *   cli/aenv.mjs       the single-file CLI
 *   share/             systemd units, default configuration, Dockerfiles, Compose file, kustomize
 *                      manifests (from deploy/)
 *   scripts/           install.sh, uninstall.sh, prerequisites.sh, build-images.sh
 *   release.json       version, platform, Node version and module ABI, glibc, commit, commands
 *   SHA256SUMS         every file's checksum
 */

export interface ReleaseOptions {
  readonly repo: string;
  readonly outDir: string;
  /** Keep the unpacked tree beside the tarball. */
  readonly keepTree?: boolean;
  readonly log?: (line: string) => void;
}

export interface ReleaseResult {
  readonly name: string;
  readonly tarball: string;
  readonly checksumFile: string;
  readonly sha256: string;
  readonly commands: readonly string[];
  readonly treeBytes: number;
  readonly tarballBytes: number;
}

interface RootManifest {
  readonly version?: string;
  readonly workspaces?: readonly string[];
}

const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

function readWorkspaces(repo: string, root: RootManifest): WorkspaceManifest[] {
  return (root.workspaces ?? []).map((location) => {
    const pkg = readJson<Partial<WorkspaceManifest>>(path.join(repo, location, 'package.json'));
    return {
      location,
      name: pkg.name ?? location,
      version: pkg.version ?? '0.0.0',
      bin: pkg.bin ?? {},
      scripts: pkg.scripts ?? {},
      hasToolsBundle: existsSync(path.join(repo, location, 'dist-tools', 'manifest.json')),
    };
  });
}

function launcher(target: string, what: string): string {
  return [
    '#!/bin/sh',
    `# ${what}, with the Node.js shipped in this release (native modules are built for it).`,
    'root=$(dirname "$(dirname "$(readlink -f "$0")")")',
    `exec "$root/node/bin/node" "$root/${target}" "$@"`,
    '',
  ].join('\n');
}

function gitCommit(repo: string): string {
  const run = (args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' }).trim();
  try {
    const commit = run(['rev-parse', 'HEAD']);
    return run(['status', '--porcelain', '--untracked-files=no']) ? `${commit}-dirty` : commit;
  } catch {
    return 'unknown';
  }
}

function glibcVersion(): string | undefined {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return report?.header?.glibcVersionRuntime;
}

async function stageApp(repo: string, tree: string, plan: ReleasePlan, lock: Lockfile): Promise<string[]> {
  const closure = productionClosure(
    lock,
    plan.services.map((s) => s.pkg.location),
  );
  const platformArch = `linux-${process.arch}`;
  for (const location of closure.modules) {
    const src = path.join(repo, location);
    if (!existsSync(src)) {
      if (lock.packages[location]?.optional) continue;
      throw new Error(`${location} is needed at run time but not installed: run npm ci`);
    }
    await copyModule(src, path.join(tree, 'app', location), platformArch);
  }
  const byLocation = new Map(
    [plan.tools, ...plan.services.map((s) => s.pkg)].map((w) => [w.location, w] as const),
  );
  const shipped: WorkspaceManifest[] = [plan.tools];
  for (const location of closure.workspaces) {
    const pkg = byLocation.get(location) ?? readWorkspaces(repo, { workspaces: [location] })[0]!;
    if (pkg === plan.tools) continue;
    // native/build: the helper programs a package runs (the node's aenv-reaper and aenv-volfs).
    const entries = [
      'package.json',
      'dist',
      ...(Object.keys(pkg.bin).length ? ['bin'] : []),
      ...(existsSync(path.join(repo, location, 'native', 'build')) ? ['native/build'] : []),
    ];
    await copyBuilt(path.join(repo, location), path.join(tree, 'app', location), entries);
    shipped.push(pkg);
  }
  // A service may import the tools package's own modules (the node verifies envd's signed file
  // URLs with envd's code), so its build ships beside the bundle when the closure reaches it.
  const toolsImported = closure.workspaces.includes(plan.tools.location);
  await copyBuilt(path.join(repo, plan.tools.location), path.join(tree, 'app', plan.tools.location), [
    'package.json',
    'dist-tools',
    ...(toolsImported ? ['dist'] : []),
  ]);
  for (const pkg of shipped) {
    const linkPath = path.join(tree, 'app', 'node_modules', pkg.name);
    await mkdir(path.dirname(linkPath), { recursive: true });
    await symlink(path.relative(path.dirname(linkPath), path.join(tree, 'app', pkg.location)), linkPath);
  }
  const appManifest = {
    name: 'agentenv-release',
    private: true,
    type: 'module',
    workspaces: shipped.map((w) => w.location).sort(),
  };
  await writeFile(path.join(tree, 'app', 'package.json'), `${JSON.stringify(appManifest, null, 2)}\n`);
  return closure.modules.filter((m) => existsSync(path.join(tree, 'app', m)));
}

export async function buildRelease(opts: ReleaseOptions): Promise<ReleaseResult> {
  const log = opts.log ?? (() => undefined);
  const { repo } = opts;
  const root = readJson<RootManifest>(path.join(repo, 'package.json'));
  if (!root.version) throw new Error('the root package.json has no "version": the release is named after it');
  if (process.platform !== 'linux')
    throw new Error(`releases are built on Linux (this is ${process.platform})`);
  const name = `aenv-${root.version}-linux-${process.arch}`;
  const tree = path.join(opts.outDir, name);
  const plan = planRelease(readWorkspaces(repo, root));
  for (const s of plan.services) {
    if (!existsSync(path.join(repo, s.pkg.location, 'dist'))) {
      throw new Error(`${s.pkg.name} is not built (no dist/): run npm run build first`);
    }
  }
  await rm(tree, { recursive: true, force: true });
  await mkdir(path.join(tree, 'bin'), { recursive: true });

  log(`staging ${name}: services ${plan.services.map((s) => s.pkg.name).join(', ')}`);
  const modules = await stageApp(repo, tree, plan, readJson<Lockfile>(path.join(repo, 'package-lock.json')));

  await mkdir(path.join(tree, 'node', 'bin'), { recursive: true });
  const toolsNode = path.join(tree, 'app', plan.tools.location, 'dist-tools', 'bin', 'node');
  const how = await linkOrCopy(process.execPath, path.join(tree, 'node', 'bin', 'node'), toolsNode);
  log(`node ${process.version} (${how === 'linked' ? 'the tools bundle’s own, stored once' : 'copied'})`);

  const cliFile = path.join(tree, 'cli', 'aenv.mjs');
  const bundled = spawnSync('npm', ['run', '--silent', 'bundle', '-w', plan.cli.name, '--', cliFile], {
    cwd: repo,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (bundled.status !== 0) throw new Error(`bundling ${plan.cli.name} failed`);

  const commands: Record<string, string> = {};
  for (const s of plan.services) {
    for (const [command, script] of Object.entries(s.commands)) {
      const target = path.posix.join('app', s.pkg.location, script);
      await writeFile(path.join(tree, 'bin', command), launcher(target, `${command} (${s.pkg.name})`));
      commands[command] = s.pkg.name;
    }
  }
  await writeFile(
    path.join(tree, 'bin', CLI_COMMAND),
    launcher('cli/aenv.mjs', `${CLI_COMMAND} (${plan.cli.name})`),
  );
  commands[CLI_COMMAND] = plan.cli.name;
  for (const command of Object.keys(commands)) await chmod(path.join(tree, 'bin', command), 0o755);

  for (const part of ['systemd', 'config', 'docker', 'compose', 'k8s']) {
    await cp(path.join(repo, 'deploy', part), path.join(tree, 'share', part), {
      recursive: true,
      // An operator's key files stay out of a release.
      filter: (from) => !/(^|\/)api-key(\.env)?$/.test(from),
    });
  }
  await mkdir(path.join(tree, 'scripts'));
  for (const script of ['install.sh', 'uninstall.sh', 'prerequisites.sh', 'build-images.sh']) {
    await cp(path.join(repo, 'scripts', script), path.join(tree, 'scripts', script));
  }

  const manifest = {
    name: 'agentenv',
    version: root.version,
    platform: 'linux',
    arch: process.arch,
    node: process.versions.node,
    nodeModuleAbi: process.versions.modules,
    glibc: glibcVersion(),
    commit: gitCommit(repo),
    commands,
    packages: modules.length,
  };
  await writeFile(path.join(tree, 'release.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const files = await writeChecksums(tree);
  const treeBytes = await totalSize(tree);
  log(`${files} files, ${(treeBytes / 2 ** 20).toFixed(1)} MiB; packing`);

  const tarball = path.join(opts.outDir, `${name}.tar.gz`);
  const tar = spawnSync(
    'tar',
    ['-C', opts.outDir, '--owner=0', '--group=0', '--numeric-owner', '--sort=name', '-czf', tarball, name],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  if (tar.status !== 0) throw new Error(`tar failed (exit ${tar.status})`);
  const sha256 = await sha256File(tarball);
  const checksumFile = `${tarball}.sha256`;
  await writeFile(checksumFile, `${sha256}  ${path.basename(tarball)}\n`);
  if (!opts.keepTree) await rm(tree, { recursive: true, force: true });
  const { size } = await import('node:fs/promises').then((fs) => fs.stat(tarball));
  return {
    name,
    tarball,
    checksumFile,
    sha256,
    commands: Object.keys(commands),
    treeBytes,
    tarballBytes: size,
  };
}

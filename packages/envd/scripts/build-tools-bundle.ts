/**
 * Builds the envd "tools bundle": a relocatable, self-contained directory that runs envd inside
 * any Linux root filesystem (glibc, musl, busybox, with or without Node.js). It holds envd bundled
 * into one file, this machine's node binary, the native packages envd depends on, every shared
 * library those need and the dynamic loader, which is started directly so nothing comes from the
 * root filesystem, plus the `sudo` client that runs commands through envd. See the "Tools bundle"
 * section of packages/envd/README.md.
 *
 *   tsx scripts/build-tools-bundle.ts [--out DIR]      (npm run bundle -w @agentenv/envd)
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const ENVD_DIR = fileURLToPath(new URL('..', import.meta.url));
export const DEFAULT_OUT = path.join(ENVD_DIR, 'dist-tools');
/** Where sandboxes mount the bundle; the sudo launcher's fallback when it cannot resolve itself. */
const TOOLS_MOUNT = '/opt/aenv-tools';

/**
 * envd's node options, each kept because it measured better in idle restored sandboxes (gVisor,
 * 1 vCPU pinned, 4-8 sandboxes, two runs): no V8 background threads (`--single-threaded`: GC and
 * compilation on the main thread, fewer guest threads for the sentry to run) and a 1 MiB young
 * generation (`--max-semi-space-size=1`), together about -5 MiB PSS and -20 % idle CPU per
 * sandbox, `commands.run` latency unchanged (p50 62-72 ms vs 67-75 ms). `--v8-pool-size=1` alone
 * changed nothing, `--optimize-for-size` added nothing; under `--jitless` or `--lite-mode` envd
 * dropped its first connections.
 */
const ENVD_NODE_FLAGS = ['--single-threaded', '--max-semi-space-size=1'];

export interface ToolsBundleOptions {
  /** Where the bundle lands; replaced as a whole. Default: packages/envd/dist-tools. */
  outDir?: string;
  /** The envd entry point. Default: packages/envd/src/main.ts. */
  entry?: string;
}

/**
 * How to start envd, relative to the bundle root: `<root>/<loader> --library-path
 * <root>/<libraryPath> <root>/<node> <root>/<script> [args]`, or `<root>/<launcher> [args]`.
 */
export interface BundleEntry {
  loader: string;
  libraryPath: string;
  node: string;
  script: string;
  launcher: string;
  /** Node options envd runs with (between the node binary and the script). */
  nodeFlags: string[];
  /** The sudo client (src/sudo/client.ts) and its launcher, which sandboxes link into PATH. */
  sudo: { script: string; launcher: string };
}

export interface ToolsManifest {
  envdVersion: string;
  nodeVersion: string;
  platform: string;
  arch: string;
  /** sha256 over every file's path, mode and content: a cache key for the whole bundle. */
  contentHash: string;
  entry: BundleEntry;
  files: { path: string; size: number; mode: string; sha256: string }[];
}

interface PackageJson {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

function readJson<T>(file: string): T {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
}

/** Finds an installed package the way Node does: node_modules/<name> in `from` and its parents. */
function findPackageDir(name: string, from: string): string | undefined {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return fs.realpathSync(candidate);
    if (dir === path.dirname(dir)) return undefined;
  }
}

/** A package and its installed runtime dependencies (missing optional ones are skipped), by name. */
function packageClosure(name: string, from: string): Map<string, string> {
  const found = new Map<string, string>();
  const queue: [string, string][] = [[name, from]];
  for (let item = queue.shift(); item; item = queue.shift()) {
    const [dep, parent] = item;
    const dir = findPackageDir(dep, parent);
    if (!dir) {
      if (dep === name) throw new Error(`package ${dep} is not installed (from ${from})`);
      continue;
    }
    const seen = found.get(dep);
    if (seen && seen !== dir) throw new Error(`two versions of ${dep} needed: ${seen} and ${dir}`);
    if (seen) continue;
    found.set(dep, dir);
    const pkg = readJson<PackageJson>(path.join(dir, 'package.json'));
    for (const d of Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies })) queue.push([d, dir]);
  }
  return found;
}

/** Every regular file under `dir`, relative; nested node_modules only when asked. */
function listFiles(dir: string, withNodeModules: boolean, rel = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const p = path.join(rel, e.name);
    if (e.isDirectory() && (withNodeModules || e.name !== 'node_modules')) {
      out.push(...listFiles(dir, withNodeModules, p));
    } else if (e.isFile()) out.push(p);
  }
  return out.sort();
}

function isElf(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(4);
    fs.readSync(fd, head, 0, 4, 0);
    return head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The files of a package needed at run time: JavaScript, JSON and native modules for this
 * machine. Sources, headers, docs, tests and other platforms' prebuilds are left behind.
 */
function runtimeFiles(pkgDir: string): string[] {
  const platform = `${process.platform}-${process.arch}`;
  // Nested node_modules are left out: those packages are copied flat, as dependencies.
  return listFiles(pkgDir, false).filter((rel) => {
    const parts = rel.split(path.sep);
    const prebuild = parts.indexOf('prebuilds');
    if (prebuild >= 0 && !parts[prebuild + 1]?.startsWith(platform)) return false;
    if (/\.(test|spec)\.[cm]?js$/.test(rel)) return false;
    // The bundled node is a glibc program: musl builds of a native module cannot load in it.
    if (rel.endsWith('.node')) return !rel.includes('musl') && isElf(path.join(pkgDir, rel));
    return /\.([cm]?js|json)$/.test(rel);
  });
}

/** Runtime dependencies of envd that hold native modules, each with its own closure of packages. */
function nativePackages(): Map<string, Map<string, string>> {
  const pkg = readJson<PackageJson>(path.join(ENVD_DIR, 'package.json'));
  const native = new Map<string, Map<string, string>>();
  for (const dep of Object.keys(pkg.dependencies ?? {})) {
    const closure = packageClosure(dep, ENVD_DIR);
    const hasNode = [...closure.values()].some((dir) => runtimeFiles(dir).some((f) => f.endsWith('.node')));
    if (hasNode) native.set(dep, closure);
  }
  return native;
}

/** Copies a package's runtime files to <out>/node_modules/<name>; returns the ELF files copied. */
function copyPackage(name: string, srcDir: string, outDir: string): string[] {
  const dest = path.join(outDir, 'node_modules', name);
  const elves: string[] = [];
  for (const rel of runtimeFiles(srcDir)) {
    const to = path.join(dest, rel);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(path.join(srcDir, rel), to);
    if (rel.endsWith('.node')) elves.push(to);
  }
  return elves;
}

/**
 * Copies the native packages and their dependencies into <out>/node_modules; returns the ELF
 * files copied. napi-rs loaders pick `<pkg>-linux-<arch>-musl` when the root filesystem's
 * /usr/bin/ldd mentions musl (Alpine), but the bundled node is a glibc program and needs the -gnu
 * build whatever the root filesystem is: so an installed -musl binding is left out and each -gnu
 * binding is also copied under the -musl name.
 */
function copyNativePackages(native: Map<string, Map<string, string>>, outDir: string): string[] {
  const packages = new Map([...native.values()].flatMap((closure) => [...closure]));
  const elves: string[] = [];
  for (const [name, src] of packages) {
    if (/-linux-[a-z0-9]+-musl$/.test(name)) continue;
    elves.push(...copyPackage(name, src, outDir));
    const musl = name.replace(/-linux-([a-z0-9]+)-gnu$/, '-linux-$1-musl');
    if (musl !== name) copyPackage(musl, src, outDir);
  }
  return elves;
}

interface SharedLibraries {
  /** soname → file on this machine. */
  libs: Map<string, string>;
  /** The dynamic loader (ELF interpreter) on this machine. */
  loader: string;
}

/** The shared libraries and loader that `ldd` resolves for the given ELF files. */
function sharedLibraries(elves: string[]): SharedLibraries {
  const libs = new Map<string, string>();
  let loader: string | undefined;
  for (const elf of elves) {
    const out = execFileSync('ldd', [elf], { encoding: 'utf8' });
    for (const line of out.split('\n').map((l) => l.trim())) {
      if (!line || line.startsWith('linux-vdso') || line.startsWith('linux-gate')) continue;
      if (line.includes('not found')) throw new Error(`${elf}: ${line}`);
      const mapped = /^(\S+) => (\/\S+) \(/.exec(line);
      const direct = /^(\/\S+) \(/.exec(line);
      if (mapped) libs.set(mapped[1]!, mapped[2]!);
      else if (direct && /\/ld-linux[^/]*\.so\.\d+$/.test(direct[1]!)) loader = direct[1]!;
      else if (direct) libs.set(path.basename(direct[1]!), direct[1]!);
    }
  }
  if (!loader) throw new Error(`no dynamic loader found by ldd for ${elves.join(', ')}`);
  for (const [name, file] of libs) if (path.basename(file) === path.basename(loader)) libs.delete(name);
  return { libs, loader };
}

/** Bundles a program into one ESM file; native packages stay external, loaded from node_modules. */
async function bundleScript(entry: string, outFile: string, external: string[]): Promise<void> {
  await build({
    entryPoints: [entry],
    outfile: outFile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external,
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
    // Bundled CommonJS code calls require() for Node built-ins; ESM has no require of its own.
    banner: {
      js:
        "import { createRequire as __aenvCreateRequire } from 'node:module';" +
        'const require = __aenvCreateRequire(import.meta.url);',
    },
  });
}

/**
 * The POSIX sh launcher: finds the bundle from its own path with shell built-ins only, and starts
 * node through the bundled loader. --library-path (unlike LD_LIBRARY_PATH) is not inherited by
 * the processes envd starts, so they use the root filesystem's own libraries.
 */
function launcherScript(entry: BundleEntry): string {
  const flags = entry.nodeFlags.join(' ');
  return `#!/bin/sh
# Starts AgentENV's envd from this tools bundle, whatever the root filesystem's libc.
# Without a shell, exec directly: <dir>/${entry.loader} --library-path <dir>/${entry.libraryPath} \\
#   <dir>/${entry.node} ${flags} <dir>/${entry.script} --port 49983
case "$0" in */*) here=\${0%/*} ;; *) here=. ;; esac
dir=$(cd "$here/.." && pwd -P) || exit 1
exec "$dir/${entry.loader}" --library-path "$dir/${entry.libraryPath}" "$dir/${entry.node}" ${flags} "$dir/${entry.script}" "$@"
`;
}

/**
 * The sudo launcher. It is reached through a symlink in PATH (/usr/local/bin/sudo), so it finds
 * the bundle from its resolved path (readlink -f, when the image has it), else at the usual
 * mount point.
 */
function sudoLauncherScript(entry: BundleEntry): string {
  return `#!/bin/sh
# sudo for AgentENV sandboxes: envd (root) runs the command, as gVisor forbids setuid programs.
self=$(readlink -f "$0" 2>/dev/null) || self=$0
case "$self" in */*) dir=$(cd "\${self%/*}/.." 2>/dev/null && pwd -P) ;; *) dir= ;; esac
[ -f "$dir/${entry.sudo.script}" ] || dir=${TOOLS_MOUNT}
exec "$dir/${entry.loader}" --library-path "$dir/${entry.libraryPath}" "$dir/${entry.node}" "$dir/${entry.sudo.script}" "$@"
`;
}

function sha256File(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Lists every file of the bundle with its hash, and hashes the list into one content hash. */
function describeFiles(dir: string): { files: ToolsManifest['files']; contentHash: string } {
  const whole = createHash('sha256');
  const files = listFiles(dir, true).map((rel) => {
    const st = fs.statSync(path.join(dir, rel));
    const file = {
      path: rel.split(path.sep).join('/'),
      size: st.size,
      mode: (st.mode & 0o777).toString(8),
      sha256: sha256File(path.join(dir, rel)),
    };
    whole.update(`${file.path}\0${file.mode}\0${file.sha256}\n`);
    return file;
  });
  return { files, contentHash: whole.digest('hex') };
}

function copyExecutable(from: string, to: string): void {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
  fs.chmodSync(to, 0o755);
}

/**
 * The native addons of envd, each compiled from native/<name>.c into native/<name>.node in the
 * bundle: loop-refresh (how envd drops a dead epoll interest a restored checkpoint can carry),
 * bind-mount (how envd gives a sandbox its own boot id, see src/boot-id.ts, and binds its volumes,
 * src/volumes.ts) and inotify (directory watching with the kernel's event types,
 * src/filesystem/inotify.ts).
 */
export const NATIVE_ADDONS = ['loop-refresh', 'bind-mount', 'inotify'] as const;

/**
 * Where envd run from the package (src/ in tests, dist/) finds its addons: only inotify is built
 * there, because watching must work wherever envd runs, while the other two act on the machine
 * envd runs in, which is meant to be a sandbox's.
 */
export const PACKAGE_ADDONS = path.join(ENVD_DIR, 'native', 'build');

/**
 * Compiles native/<name>.c into <dir>/<name>.node against the headers of the node that
 * runs this build, which is the node the bundle ships. Without a C compiler or node's headers the
 * bundle is built without it (envd then logs that it runs without what the addon gives).
 */
export function buildAddon(dir: string, name: (typeof NATIVE_ADDONS)[number]): string | undefined {
  const out = path.join(dir, `${name}.node`);
  const include = path.resolve(path.dirname(fs.realpathSync(process.execPath)), '..', 'include', 'node');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  try {
    execFileSync(
      process.env.CC ?? 'cc',
      [
        '-shared',
        '-fPIC',
        '-O2',
        '-Wall',
        '-Werror',
        `-DNODE_GYP_MODULE_NAME=${name.replace('-', '_')}`,
        `-I${include}`,
        '-o',
        out,
        path.join(ENVD_DIR, 'native', `${name}.c`),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    return out;
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    console.warn(
      `tools bundle: native/${name}.node not built (${e.stderr?.toString().trim() || e.message}); ` +
        'envd will run without it',
    );
    fs.rmSync(out, { force: true });
    return undefined;
  }
}

/** Fills `dir` (empty) with the bundle; returns its manifest. */
async function assemble(dir: string, entryPoint: string): Promise<ToolsManifest> {
  const native = nativePackages();
  await bundleScript(entryPoint, path.join(dir, 'envd.mjs'), [...native.keys()]);
  await bundleScript(path.join(ENVD_DIR, 'src', 'sudo', 'client.ts'), path.join(dir, 'sudo.mjs'), []);
  const node = path.join(dir, 'bin', 'node');
  copyExecutable(fs.realpathSync(process.execPath), node);

  const addons = NATIVE_ADDONS.flatMap((name) => buildAddon(path.join(dir, 'native'), name) ?? []);
  const { libs, loader } = sharedLibraries([node, ...copyNativePackages(native, dir), ...addons]);
  const libDir = path.join(dir, 'lib');
  for (const [soname, file] of libs) copyExecutable(file, path.join(libDir, soname));
  copyExecutable(loader, path.join(libDir, path.basename(loader)));

  const entry: BundleEntry = {
    loader: `lib/${path.basename(loader)}`,
    libraryPath: 'lib',
    node: 'bin/node',
    script: 'envd.mjs',
    launcher: 'bin/envd',
    nodeFlags: ENVD_NODE_FLAGS,
    sudo: { script: 'sudo.mjs', launcher: 'bin/sudo' },
  };
  fs.writeFileSync(path.join(dir, entry.launcher), launcherScript(entry), { mode: 0o755 });
  fs.writeFileSync(path.join(dir, entry.sudo.launcher), sudoLauncherScript(entry), { mode: 0o755 });

  const { files, contentHash } = describeFiles(dir);
  const manifest: ToolsManifest = {
    envdVersion: readJson<PackageJson>(path.join(ENVD_DIR, 'package.json')).version,
    nodeVersion: process.versions.node,
    platform: process.platform,
    arch: process.arch,
    contentHash,
    entry,
    files,
  };
  fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}

/**
 * Builds the bundle into a staging directory beside `outDir`, then swaps it in, so a failed
 * build never leaves a half-made bundle behind.
 */
export async function buildToolsBundle(opts: ToolsBundleOptions = {}): Promise<ToolsManifest> {
  if (process.platform !== 'linux') throw new Error('the tools bundle can only be built on Linux');
  const outDir = path.resolve(opts.outDir ?? DEFAULT_OUT);
  const staging = `${outDir}.partial-${process.pid}`;
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true });
  try {
    const manifest = await assemble(staging, opts.entry ?? path.join(ENVD_DIR, 'src', 'main.ts'));
    fs.rmSync(outDir, { recursive: true, force: true });
    fs.renameSync(staging, outDir);
    return manifest;
  } catch (err) {
    fs.rmSync(staging, { recursive: true, force: true });
    throw err;
  }
}

function totalSize(manifest: ToolsManifest): string {
  const bytes = manifest.files.reduce((n, f) => n + f.size, 0);
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { out: { type: 'string' } }, strict: true });
  const outDir = path.resolve(values.out ?? DEFAULT_OUT);
  const manifest = await buildToolsBundle({ outDir });
  buildAddon(PACKAGE_ADDONS, 'inotify');
  console.log(
    `tools bundle: ${outDir} (${manifest.files.length} files, ${totalSize(manifest)}, ` +
      `hash ${manifest.contentHash.slice(0, 12)})`,
  );
}

if (process.argv[1] && fs.realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}

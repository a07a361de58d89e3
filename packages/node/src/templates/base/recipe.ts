import { createHash } from 'node:crypto';

/** Everything that determines the bytes of a Debian root filesystem built with mmdebstrap. */
export interface RootfsRecipe {
  /** Bumped when the build procedure itself changes in a way the other fields do not show. */
  readonly schema: number;
  readonly suite: string;
  readonly mirror: string;
  readonly variant: 'minbase' | 'apt' | 'essential';
  readonly architecture: string;
  readonly packages: readonly string[];
  readonly user: {
    readonly name: string;
    readonly uid: number;
    readonly home: string;
    readonly shell: string;
  };
  readonly hostname: string;
}

/**
 * The default `base` template (E2B-COMPAT.md §4): what E2B's tests and most agent code assume.
 * `less`/`ncurses-base`/`locales`-free on purpose: envd's PTY shell needs only bash and terminfo,
 * which minbase already has.
 */
export const BASE_RECIPE: RootfsRecipe = {
  schema: 2,
  suite: 'bookworm',
  mirror: 'http://deb.debian.org/debian',
  variant: 'minbase',
  architecture: 'amd64',
  packages: [
    'bash',
    'ca-certificates',
    'curl',
    'git',
    'iproute2',
    'nodejs',
    'procps',
    'python-is-python3',
    'python3',
    'python3-pip',
    'sudo',
  ],
  user: { name: 'user', uid: 1000, home: '/home/user', shell: '/bin/bash' },
  hostname: 'aenv',
};

/** Key order must not change a hash, so objects are serialised with sorted keys. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Package order is irrelevant to the result, so it is normalised before hashing. */
export function recipeHash(recipe: RootfsRecipe): string {
  return sha256Hex(canonicalJson({ ...recipe, packages: [...new Set(recipe.packages)].sort() }));
}

/**
 * A template's ready state depends on its root filesystem, on the envd that runs in it and on
 * the runtime that captured it (a gVisor image only restores under the same runsc build).
 */
export function readyStateKey(parts: { rootfs: string; tools: string; runtime: string }): string {
  return sha256Hex(canonicalJson(parts));
}

/** The mmdebstrap command line for a recipe; `target` is the directory to fill. */
export function mmdebstrapArgs(recipe: RootfsRecipe, target: string): string[] {
  const u = recipe.user;
  const sudoers = `${u.name} ALL=(ALL:ALL) NOPASSWD:ALL`;
  const hosts = `127.0.0.1 localhost ${recipe.hostname}\\n::1 localhost ip6-localhost ip6-loopback\\n`;
  return [
    `--variant=${recipe.variant}`,
    `--architectures=${recipe.architecture}`,
    '--mode=root',
    '--format=directory',
    // Recommends would pull compilers and docs into every sandbox (python3-pip alone adds ~200 MB).
    '--aptopt=APT::Install-Recommends "false"',
    `--include=${[...new Set(recipe.packages)].sort().join(',')}`,
    `--customize-hook=chroot "$1" useradd --uid ${u.uid} --create-home --home-dir ${u.home} --shell ${u.shell} --user-group ${u.name}`,
    `--customize-hook=echo '${sudoers}' > "$1/etc/sudoers.d/90-${u.name}" && chmod 0440 "$1/etc/sudoers.d/90-${u.name}"`,
    // gVisor sets no-new-privileges on every process, so setuid sudo cannot work; the tools
    // bundle's sudo asks envd (root) to run the command instead, and comes first in PATH.
    `--customize-hook=ln -sf /opt/aenv-tools/bin/sudo "$1/usr/local/bin/sudo"`,
    // The host's resolver is on loopback or a private range, which sandboxes cannot reach.
    `--customize-hook=printf 'nameserver 1.1.1.1\\nnameserver 8.8.8.8\\n' > "$1/etc/resolv.conf"`,
    `--customize-hook=echo ${recipe.hostname} > "$1/etc/hostname"`,
    `--customize-hook=printf '${hosts}' > "$1/etc/hosts"`,
    // Mount points the OCI spec and the tools bundle need, so the read-only lower has them.
    `--customize-hook=mkdir -p "$1/opt/aenv-tools" "$1/proc" "$1/sys" "$1/dev" "$1/tmp" && chmod 1777 "$1/tmp"`,
    recipe.suite,
    target,
    recipe.mirror,
  ];
}

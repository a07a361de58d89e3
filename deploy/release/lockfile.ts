/**
 * Which installed packages a release needs, read from package-lock.json (lockfile v2/v3) alone: the
 * production dependency closure of the workspaces it ships, resolved the way Node resolves them
 * (nearest `node_modules` first, then each parent directory's). Pure: no file system access.
 */

export interface LockEntry {
  readonly name?: string;
  readonly version?: string;
  readonly link?: boolean;
  readonly resolved?: string;
  readonly dev?: boolean;
  readonly optional?: boolean;
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly optionalDependencies?: Readonly<Record<string, string>>;
  readonly peerDependencies?: Readonly<Record<string, string>>;
  readonly peerDependenciesMeta?: Readonly<Record<string, { readonly optional?: boolean }>>;
}

export interface Lockfile {
  readonly lockfileVersion: number;
  readonly packages: Readonly<Record<string, LockEntry>>;
}

export interface Closure {
  /** Lockfile locations of installed packages (`node_modules/x`, `packages/a/node_modules/y`), sorted. */
  readonly modules: readonly string[];
  /** Workspace locations (`packages/node`) reached, the roots included, sorted. */
  readonly workspaces: readonly string[];
}

export class LockfileError extends Error {
  override readonly name = 'LockfileError';
}

const parentDir = (dir: string): string | undefined => {
  if (dir === '') return undefined;
  const cut = dir.lastIndexOf('/');
  return cut < 0 ? '' : dir.slice(0, cut);
};

/** The location Node would load `name` from when required by the package at `from`. */
export function resolveLocation(lock: Lockfile, from: string, name: string): string | undefined {
  for (let dir: string | undefined = from; dir !== undefined; dir = parentDir(dir)) {
    const candidate = `${dir ? `${dir}/` : ''}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
  }
  return undefined;
}

/** What an entry needs at run time: dependencies, optional ones, and non-optional peers. */
function runtimeNeeds(entry: LockEntry): { name: string; optional: boolean }[] {
  const peers = Object.keys(entry.peerDependencies ?? {}).map((name) => ({
    name,
    optional: entry.peerDependenciesMeta?.[name]?.optional === true,
  }));
  return [
    ...Object.keys(entry.dependencies ?? {}).map((name) => ({ name, optional: false })),
    ...Object.keys(entry.optionalDependencies ?? {}).map((name) => ({ name, optional: true })),
    ...peers,
  ];
}

/**
 * Everything the given workspaces (`packages/node`, …) load at run time. A missing optional
 * dependency (another platform's binary) is skipped; a missing required one is an error, since
 * the release would fail at run time.
 */
export function productionClosure(lock: Lockfile, roots: readonly string[]): Closure {
  if (lock.lockfileVersion < 2) {
    throw new LockfileError(`package-lock.json v${lock.lockfileVersion} has no "packages" map; use npm >= 7`);
  }
  const modules = new Set<string>();
  const workspaces = new Set<string>();
  const queue: string[] = [];
  const visit = (location: string) => {
    const entry = lock.packages[location];
    if (!entry) throw new LockfileError(`package-lock.json has no entry "${location}"`);
    if (entry.link) {
      if (!entry.resolved) throw new LockfileError(`link "${location}" does not say where it points`);
      visit(entry.resolved);
      return;
    }
    const seen = location.includes('node_modules/') ? modules : workspaces;
    if (seen.has(location)) return;
    seen.add(location);
    queue.push(location);
  };
  for (const root of roots) visit(root);
  for (let location = queue.shift(); location !== undefined; location = queue.shift()) {
    for (const need of runtimeNeeds(lock.packages[location]!)) {
      const found = resolveLocation(lock, location, need.name);
      if (found) visit(found);
      else if (!need.optional) {
        throw new LockfileError(`"${need.name}" (needed by ${location}) is not in package-lock.json`);
      }
    }
  }
  return { modules: [...modules].sort(), workspaces: [...workspaces].sort() };
}

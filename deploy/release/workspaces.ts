/**
 * What each workspace package contributes to a release, decided from its package.json alone so
 * that a new package (a scheduler, a gateway) ships without editing a list here:
 * - the one whose build leaves an envd tools bundle (`dist-tools/manifest.json`) ships that bundle;
 * - the one with the `aenv` command ships as a single file made by its `bundle` script;
 * - every other package with an `aenv-*` command is a service: its build, its commands, and the
 *   production dependencies of it and of the workspace packages it uses.
 */

export interface WorkspaceManifest {
  /** Location relative to the repository root, as in package-lock.json (`packages/node`). */
  readonly location: string;
  readonly name: string;
  readonly version: string;
  readonly bin: Readonly<Record<string, string>>;
  readonly scripts: Readonly<Record<string, string>>;
  /** Whether `dist-tools/manifest.json` exists (a built tools bundle). */
  readonly hasToolsBundle: boolean;
}

export interface ReleasePlan {
  /** The tools bundle package (its package.json and dist-tools/ only). */
  readonly tools: WorkspaceManifest;
  /** The CLI package, bundled into one file. */
  readonly cli: WorkspaceManifest;
  /** Service packages with their `aenv-*` commands (command name → script path in the package). */
  readonly services: readonly {
    readonly pkg: WorkspaceManifest;
    readonly commands: Readonly<Record<string, string>>;
  }[];
}

export const CLI_COMMAND = 'aenv';
const SERVICE_COMMAND = /^aenv-[a-z0-9-]+$/;

export class PlanError extends Error {
  override readonly name = 'PlanError';
}

export function planRelease(workspaces: readonly WorkspaceManifest[]): ReleasePlan {
  const tools = workspaces.filter((w) => w.hasToolsBundle);
  if (tools.length !== 1) {
    throw new PlanError(
      tools.length === 0
        ? 'no workspace has a built envd tools bundle (dist-tools/manifest.json): run npm run build first'
        : `more than one workspace has a tools bundle: ${tools.map((w) => w.name).join(', ')}`,
    );
  }
  const cli = workspaces.filter((w) => CLI_COMMAND in w.bin);
  if (cli.length !== 1)
    throw new PlanError(`expected one workspace with the "${CLI_COMMAND}" command, found ${cli.length}`);
  if (!cli[0]!.scripts.bundle)
    throw new PlanError(`${cli[0]!.name} has no "bundle" script to make the single-file CLI`);
  const services = workspaces
    .filter((w) => w !== tools[0] && w !== cli[0])
    .map((pkg) => ({
      pkg,
      commands: Object.fromEntries(
        Object.entries(pkg.bin).filter(([command]) => SERVICE_COMMAND.test(command)),
      ),
    }))
    .filter((s) => Object.keys(s.commands).length > 0);
  if (services.length === 0) throw new PlanError('no workspace has an aenv-* command to ship');
  const commands = services.flatMap((s) => Object.keys(s.commands));
  const twice = commands.find((c, i) => commands.indexOf(c) !== i);
  if (twice) throw new PlanError(`two workspaces define the command ${twice}`);
  return { tools: tools[0]!, cli: cli[0]!, services };
}

import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import type { ApiClient } from '../client/api.js';
import {
  followBuild,
  getTemplate,
  requestBuild,
  resolveTemplateId,
  triggerBuild,
  uploadStepFiles,
} from '../client/builds.js';
import type { BuildLogEntry, BuildSpec, BuildStep, Template } from '../client/types.js';
import { contextOf, type Context } from '../context.js';
import { CliError, UsageError } from '../errors.js';
import { parseInteger, templateNameForImage } from '../lib/args.js';
import { collectCopySources, filesHash, readIgnore } from '../lib/build-context.js';
import { parseDockerfile } from '../lib/dockerfile.js';
import { formatList, formatTime } from '../output/format.js';
import { StatusLine } from '../output/status.js';
import type { Column } from '../output/table.js';

export const TEMPLATE_COLUMNS: Column<Template>[] = [
  { header: 'TEMPLATE ID', value: (t) => t.templateID },
  { header: 'NAMES', value: (t) => formatList(t.names ?? t.aliases) },
  { header: 'STATUS', value: (t) => t.buildStatus ?? '-' },
  { header: 'CPU', value: (t) => (t.cpuCount === undefined ? '-' : String(t.cpuCount)), align: 'right' },
  { header: 'MEMORY', value: (t) => (t.memoryMB === undefined ? '-' : `${t.memoryMB} MiB`), align: 'right' },
  { header: 'UPDATED', value: (t) => formatTime(t.updatedAt ?? t.createdAt) },
];

function logLine(e: BuildLogEntry): string {
  const time = e.timestamp ? formatTime(e.timestamp).slice(11) : '';
  const level = e.level && e.level !== 'info' ? `${e.level.toUpperCase()} ` : '';
  return `${time} ${level}${e.message}`.trim();
}

/** Follows a build with live status and logs; throws when it fails. */
async function watchBuild(ctx: Context, api: ApiClient, templateID: string, buildID: string, label: string) {
  const status = new StatusLine();
  status.set(`${label}: waiting`);
  try {
    const final = await followBuild(api, templateID, buildID, {
      onLog: (e) => status.log(logLine(e)),
      onStatus: (s) => status.set(`${label}: ${s}`),
    });
    if (final.status === 'error') {
      status.stop();
      throw new CliError(
        `build ${buildID} of ${label} failed${final.reason?.message ? `: ${final.reason.message}` : ''}`,
      );
    }
    status.stop();
    ctx.out.result(
      { templateID, buildID, status: final.status },
      `Template ${label} is ready (template ${templateID}, build ${buildID}).`,
    );
  } catch (err) {
    status.stop();
    throw err;
  }
}

interface SizeOptions {
  cpu?: string;
  memory?: string;
}

function sizes(opts: SizeOptions) {
  return {
    ...(opts.cpu ? { cpuCount: parseInteger(opts.cpu, '--cpu', 1, 64) } : {}),
    ...(opts.memory ? { memoryMB: parseInteger(opts.memory, '--memory', 128) } : {}),
  };
}

/** Registers the build, triggers it and (unless detached) follows it. */
async function runBuild(
  ctx: Context,
  api: ApiClient,
  name: string,
  opts: SizeOptions & { detach?: boolean },
  spec: (templateID: string) => Promise<BuildSpec>,
): Promise<void> {
  const req = await requestBuild(api, { name, ...sizes(opts) });
  ctx.out.note(`Building template ${name} (template ${req.templateID}, build ${req.buildID})`);
  await triggerBuild(api, req.templateID, req.buildID, await spec(req.templateID));
  if (opts.detach) {
    ctx.out.result(
      { templateID: req.templateID, buildID: req.buildID, names: req.names ?? [name] },
      `Build started; follow it with: aenv template watch ${name}`,
    );
    return;
  }
  await watchBuild(ctx, api, req.templateID, req.buildID, name);
}

// eslint-disable-next-line max-lines-per-function -- declarative: one command definition after another
export function registerTemplateCommands(program: Command): void {
  program
    .command('pull')
    .description('turn a container image into a template (build with live status)')
    .argument('<image>', 'image reference, e.g. python:3.12-slim or ghcr.io/org/app:1.0')
    .option('-n, --name <name>', 'template name (default: derived from the image)')
    .option('--cpu <n>', 'vCPUs of sandboxes from this template')
    .option('--memory <mb>', 'memory (MiB) of sandboxes from this template')
    .option('--start-cmd <cmd>', 'command started in every new sandbox (captured running)')
    .option('--ready-cmd <cmd>', 'command that exits 0 once the start command is ready')
    .option('-d, --detach', 'start the build and exit without following it')
    .addHelpText(
      'after',
      `
Examples:
  aenv pull python:3.12-slim
  aenv pull node:22 --name node22 --cpu 2 --memory 2048
  aenv pull redis:7 --start-cmd "redis-server" --ready-cmd "redis-cli ping"`,
    )
    .action(
      async (
        image: string,
        opts: SizeOptions & { name?: string; startCmd?: string; readyCmd?: string; detach?: boolean },
        cmd: Command,
      ) => {
        const ctx = contextOf(cmd);
        const name = opts.name ?? templateNameForImage(image);
        const api = await ctx.api();
        await runBuild(ctx, api, name, opts, async () => ({
          fromImage: image,
          force: false,
          steps: [],
          ...(opts.startCmd ? { startCmd: opts.startCmd } : {}),
          ...(opts.readyCmd ? { readyCmd: opts.readyCmd } : {}),
        }));
      },
    );

  program
    .command('build')
    .description('build a template from a Dockerfile (single stage)')
    .argument('[dockerfile]', 'path to the Dockerfile', 'Dockerfile')
    .requiredOption('-n, --name <name>', 'template name')
    .option('-c, --context <dir>', 'build context for COPY (default: the Dockerfile directory)')
    .option('--cpu <n>', 'vCPUs of sandboxes from this template')
    .option('--memory <mb>', 'memory (MiB) of sandboxes from this template')
    .option('--ready-cmd <cmd>', 'command that exits 0 once the start command (CMD) is ready')
    .option('--no-cache', 'rebuild every step')
    .option('-d, --detach', 'start the build and exit without following it')
    .addHelpText(
      'after',
      `
FROM is the base image; RUN, ENV, ARG, WORKDIR, USER and COPY/ADD become build steps (COPY files
are uploaded once, by content hash; .dockerignore applies); CMD/ENTRYPOINT become the start
command. Multi-stage builds, RUN --mount and ADD <url> are not supported.

Examples:
  aenv build --name my-agent
  aenv build ./docker/Dockerfile.agent --name my-agent --context . --cpu 4`,
    )
    .action(
      async (
        dockerfile: string,
        opts: SizeOptions & {
          name: string;
          context?: string;
          readyCmd?: string;
          cache: boolean;
          detach?: boolean;
        },
        cmd: Command,
      ) => {
        const ctx = contextOf(cmd);
        let text: string;
        try {
          text = await readFile(dockerfile, 'utf8');
        } catch (err) {
          throw new UsageError(
            `cannot read ${dockerfile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
          );
        }
        const parsed = parseDockerfile(text);
        for (const i of parsed.ignored) ctx.out.note(`ignoring ${i}`);
        const contextDir = path.resolve(opts.context ?? path.dirname(dockerfile));
        if (!(await stat(contextDir).catch(() => undefined))?.isDirectory())
          throw new UsageError(`build context ${contextDir} is not a directory`);
        const ignore = await readIgnore(contextDir);
        // Collect and hash COPY sources before anything is registered on the server.
        const copies = await Promise.all(
          parsed.steps.map(async (s) => {
            if (s.type !== 'COPY') return undefined;
            const files = await collectCopySources(contextDir, s.args[0]!, ignore);
            return { files, hash: await filesHash(s.args[0]!, s.args[1]!, files) };
          }),
        );
        const api = await ctx.api();
        await runBuild(ctx, api, opts.name, opts, async (templateID) => {
          const steps: BuildStep[] = [];
          for (const [i, s] of parsed.steps.entries()) {
            const copy = copies[i];
            if (copy) {
              const sent = await uploadStepFiles(api, templateID, copy.hash, copy.files);
              ctx.out.note(
                `${sent ? 'Uploaded' : 'Cached'}: COPY ${s.args[0]} (${copy.files.length} entries)`,
              );
            }
            steps.push({ ...s, force: !opts.cache, ...(copy ? { filesHash: copy.hash } : {}) });
          }
          return {
            fromImage: parsed.fromImage,
            force: !opts.cache,
            steps,
            ...(parsed.startCmd ? { startCmd: parsed.startCmd } : {}),
            ...(opts.readyCmd ? { readyCmd: opts.readyCmd } : {}),
          };
        });
      },
    );

  const template = program
    .command('template')
    .alias('templates')
    .description('list, remove and watch templates')
    .addHelpText(
      'after',
      '\nExamples:\n  aenv template ls\n  aenv template watch my-agent\n  aenv template rm my-agent',
    );

  template
    .command('ls')
    .alias('list')
    .description('list templates')
    .addHelpText(
      'after',
      `\nColumns: ${TEMPLATE_COLUMNS.map((c) => c.header).join(', ')}.\n\nExample:\n  aenv template ls -o json`,
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const rows = await api.get<Template[]>('/templates', { feature: 'templates (GET /templates)' });
      ctx.out.list(Array.isArray(rows) ? rows : [], TEMPLATE_COLUMNS);
    });

  template
    .command('rm')
    .alias('delete')
    .description('delete a template (or snapshot) by id or name')
    .argument('<template>', 'template id or name')
    .addHelpText('after', '\nExample:\n  aenv template rm my-agent')
    .action(async (idOrName: string, _opts: unknown, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const id = await resolveTemplateId(api, idOrName);
      await api.delete(`/templates/${encodeURIComponent(id)}`, {
        feature: 'template deletion (DELETE /templates/{id})',
      });
      ctx.out.result(
        { templateID: id, deleted: true },
        `Deleted template ${idOrName}${id !== idOrName ? ` (${id})` : ''}`,
      );
    });

  template
    .command('watch')
    .description("follow a template's latest build: live status and logs until it ends")
    .argument('<template>', 'template id or name')
    .option('-b, --build <buildID>', 'a specific build instead of the latest')
    .addHelpText('after', '\nExample:\n  aenv template watch my-agent')
    .action(async (idOrName: string, opts: { build?: string }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const id = await resolveTemplateId(api, idOrName);
      let buildID = opts.build;
      if (!buildID) {
        const t = await getTemplate(api, id);
        const builds = [...(t.builds ?? [])].sort(
          (a, b) => Date.parse(b.createdAt ?? '') - Date.parse(a.createdAt ?? ''),
        );
        buildID = builds[0]?.buildID ?? t.buildID;
        if (!buildID) throw new CliError(`template ${idOrName} has no builds`);
      }
      await watchBuild(ctx, api, id, buildID, idOrName);
    });
}

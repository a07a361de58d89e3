import type { Command } from 'commander';
import type { ListedSandbox, Sandbox, SandboxDetail } from '../client/types.js';
import { contextOf } from '../context.js';
import { CliError } from '../errors.js';
import { collect, parseInteger, parseKeyValues, parseSeconds, parseStates } from '../lib/args.js';
import { formatDuration, formatMap, formatTime } from '../output/format.js';
import type { Column } from '../output/table.js';
import { ApiError } from '../client/api.js';

const path = (id: string) => `/sandboxes/${encodeURIComponent(id)}`;

/** The fixed columns of `aenv ls`. */
export const SANDBOX_COLUMNS: Column<ListedSandbox>[] = [
  { header: 'SANDBOX ID', value: (s) => s.sandboxID },
  { header: 'TEMPLATE', value: (s) => s.alias ?? s.templateID },
  { header: 'STATE', value: (s) => s.state },
  { header: 'CPU', value: (s) => String(s.cpuCount), align: 'right' },
  { header: 'MEMORY', value: (s) => `${s.memoryMB} MiB`, align: 'right' },
  { header: 'STARTED', value: (s) => formatTime(s.startedAt) },
  { header: 'ENDS', value: (s) => (s.state === 'running' ? formatTime(s.endAt) : '-') },
  { header: 'METADATA', value: (s) => formatMap(s.metadata) },
];

/** `?metadata=` as the API wants it: an url-encoded `k=v&k2=v2` string. */
export function metadataQuery(pairs: string[] = []): string | undefined {
  if (!pairs.length) return undefined;
  return new URLSearchParams(parseKeyValues(pairs, '--metadata')).toString();
}

// eslint-disable-next-line max-lines-per-function -- declarative: one command definition after another
export function registerSandboxCommands(program: Command): void {
  program
    .command('ls')
    .alias('list')
    .description('list sandboxes (running and paused, newest first)')
    .option('-s, --state <states>', 'only these states, comma separated: running,paused')
    .option('-m, --metadata <key=value>', 'only sandboxes with this metadata (repeatable)', collect)
    .option('-l, --limit <n>', 'at most this many sandboxes')
    .addHelpText(
      'after',
      `
Columns: SANDBOX ID, TEMPLATE, STATE, CPU, MEMORY, STARTED, ENDS, METADATA.
JSON output (piped or --output json) is the API's ListedSandbox array.

Examples:
  aenv ls
  aenv ls --state paused
  aenv ls --metadata user=alice --metadata run=7 -o json | jq -r '.[].sandboxID'`,
    )
    .action(async (opts: { state?: string; metadata?: string[]; limit?: string }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const max = opts.limit ? parseInteger(opts.limit, '--limit', 1) : Infinity;
      const rows = await api.list<ListedSandbox>(
        '/v2/sandboxes',
        {
          state: opts.state ? parseStates(opts.state).join(',') : undefined,
          metadata: metadataQuery(opts.metadata),
        },
        max,
      );
      ctx.out.list(rows, SANDBOX_COLUMNS);
    });

  program
    .command('pause')
    .description('pause a running sandbox (its memory and disk are kept; resume continues it)')
    .argument('<id>', 'sandbox id')
    .option('--no-memory', 'keep only its files, far smaller: the resume boots it afresh')
    .addHelpText(
      'after',
      '\nExamples:\n  aenv pause i2k3lf0q8w7x1c9m4n5b\n  aenv pause i2k3lf0q8w7x1c9m4n5b --no-memory',
    )
    .action(async (id: string, opts: { memory: boolean }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      await api.post(`${path(id)}/pause`, opts.memory ? undefined : { memory: false });
      ctx.out.result({ sandboxID: id, state: 'paused' }, `Paused ${id}`);
    });

  program
    .command('resume')
    .description('resume a paused sandbox (a running one only gets its timeout extended)')
    .argument('<id>', 'sandbox id')
    .option('-t, --timeout <secs>', 'keep it running at least this long (seconds or 5m, 1h)')
    .option('--reboot', 'boot it afresh with the files it had, not its memory and processes')
    .addHelpText(
      'after',
      '\nExamples:\n  aenv resume i2k3lf0q8w7x1c9m4n5b\n  aenv resume i2k3lf0q8w7x1c9m4n5b --timeout 1h' +
        '\n  aenv resume i2k3lf0q8w7x1c9m4n5b --reboot',
    )
    .action(async (id: string, opts: { timeout?: string; reboot?: boolean }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const body = {
        ...(opts.timeout ? { timeout: parseSeconds(opts.timeout, '--timeout') } : {}),
        ...(opts.reboot ? { memory: false } : {}),
      };
      const res = await api.post<Sandbox>(`${path(id)}/connect`, body);
      const resumed = res.status === 201;
      ctx.out.result(
        { sandboxID: id, state: 'running', resumed },
        resumed ? `Resumed ${id}` : `Sandbox ${id} is already running`,
      );
    });

  program
    .command('timeout')
    .description('set how long a sandbox keeps running from now (may shorten it)')
    .argument('<id>', 'sandbox id')
    .argument('<secs>', 'seconds from now (or a duration like 90s, 5m, 1h)')
    .addHelpText(
      'after',
      '\nExamples:\n  aenv timeout i2k3lf0q8w7x1c9m4n5b 600\n  aenv timeout i2k3lf0q8w7x1c9m4n5b 2h',
    )
    .action(async (id: string, secs: string, _opts: unknown, cmd: Command) => {
      const ctx = contextOf(cmd);
      const timeout = parseSeconds(secs, 'the timeout');
      const api = await ctx.api();
      await api.post(`${path(id)}/timeout`, { timeout });
      const sbx = await api.get<SandboxDetail>(path(id));
      ctx.out.result(
        { sandboxID: id, timeout, endAt: sbx.endAt },
        `Sandbox ${id} now ends at ${formatTime(sbx.endAt)} (in ${formatDuration(Date.parse(sbx.endAt) - Date.now())})`,
      );
    });

  program
    .command('rm')
    .alias('kill')
    .description('kill sandboxes (running or paused); their state is deleted')
    .argument('<ids...>', 'sandbox ids')
    .addHelpText(
      'after',
      '\nExamples:\n  aenv rm i2k3lf0q8w7x1c9m4n5b\n  aenv ls -o json | jq -r ".[].sandboxID" | xargs aenv rm',
    )
    .action(async (ids: string[], _opts: unknown, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      if (ids.length === 1) {
        await api.delete(path(ids[0]!));
        ctx.out.result([{ sandboxID: ids[0], killed: true }], `Killed ${ids[0]}`);
        return;
      }
      const results = await Promise.all(
        ids.map(async (id) => {
          try {
            await api.delete(path(id));
            return { sandboxID: id, killed: true };
          } catch (err) {
            if (!(err instanceof ApiError)) throw err;
            return { sandboxID: id, killed: false, error: err.message };
          }
        }),
      );
      ctx.out.result(results, () =>
        results.map((r) => (r.killed ? `Killed ${r.sandboxID}` : `${r.sandboxID}: ${r.error}`)).join('\n'),
      );
      const failed = results.filter((r) => !r.killed);
      if (failed.length)
        throw new CliError(`${failed.length} of ${ids.length} sandbox(es) could not be killed`);
    });
}

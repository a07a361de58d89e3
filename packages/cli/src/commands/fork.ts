import type { Command } from 'commander';
import type { ForkResult } from '../client/types.js';
import { contextOf } from '../context.js';
import { CliError } from '../errors.js';
import { parseInteger, parseSeconds } from '../lib/args.js';
import type { Column } from '../output/table.js';

type Row = { index: number } & ForkResult;

export const FORK_COLUMNS: Column<Row>[] = [
  { header: '#', value: (r) => String(r.index), align: 'right' },
  { header: 'SANDBOX ID', value: (r) => ('sandbox' in r ? r.sandbox.sandboxID : '-') },
  {
    header: 'RESULT',
    value: (r) => ('sandbox' in r ? 'running' : `error ${r.error.code}: ${r.error.message}`),
  },
];

export function registerForkCommand(program: Command): void {
  program
    .command('fork')
    .description('clone a running sandbox (memory, processes and disk) into new sandboxes')
    .argument('<id>', 'id of the running source sandbox')
    .option('-n, --count <n>', 'how many children', '1')
    .option('-t, --timeout <secs>', 'lifetime of the children (seconds or 5m, 1h)')
    .addHelpText(
      'after',
      `
The source keeps running. Each child is reported on its own: JSON output is the API's array of
{sandbox} | {error}; aenv exits with 1 if any child failed.

Examples:
  aenv fork i2k3lf0q8w7x1c9m4n5b
  aenv fork i2k3lf0q8w7x1c9m4n5b --count 8 -o json | jq -r '.[].sandbox.sandboxID'`,
    )
    .action(async (id: string, opts: { count: string; timeout?: string }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const count = parseInteger(opts.count, '--count', 1, 1000);
      const body = { count, ...(opts.timeout ? { timeout: parseSeconds(opts.timeout, '--timeout') } : {}) };
      const api = await ctx.api();
      const res = await api.post<ForkResult[]>(`/sandboxes/${encodeURIComponent(id)}/fork`, body, {
        feature: 'fork (POST /sandboxes/{id}/fork)',
      });
      const results = Array.isArray(res.data) ? res.data : [];
      if (ctx.out.json) ctx.out.result(results, '');
      else
        ctx.out.list(
          results.map((r, i) => ({ index: i + 1, ...r })),
          FORK_COLUMNS,
        );
      const failed = results.filter((r) => 'error' in r).length;
      if (failed) throw new CliError(`${failed} of ${results.length} fork(s) failed`);
    });
}

import type { Command } from 'commander';
import type { SnapshotInfo } from '../client/types.js';
import { contextOf } from '../context.js';
import { formatList, formatTime } from '../output/format.js';
import type { Column } from '../output/table.js';

export const SNAPSHOT_COLUMNS: Column<SnapshotInfo>[] = [
  { header: 'SNAPSHOT ID', value: (s) => s.snapshotID },
  { header: 'NAMES', value: (s) => formatList(s.names) },
  { header: 'SOURCE', value: (s) => s.sandboxID ?? '-' },
  { header: 'CPU', value: (s) => (s.cpuCount === undefined ? '-' : String(s.cpuCount)), align: 'right' },
  { header: 'MEMORY', value: (s) => (s.memoryMB === undefined ? '-' : `${s.memoryMB} MiB`), align: 'right' },
  { header: 'CREATED', value: (s) => formatTime(s.createdAt) },
  { header: 'STORED', value: (s) => (s.stored === undefined ? '-' : s.stored ? 'yes' : 'no') },
];

export function registerSnapshotCommands(program: Command): void {
  const snapshot = program
    .command('snapshot')
    .description('capture running sandboxes as snapshots, list snapshots')
    .addHelpText(
      'after',
      `
A snapshot id or name works wherever a template does: aenv start <snapshot>.

Examples:
  aenv snapshot create i2k3lf0q8w7x1c9m4n5b --name warm-python
  aenv snapshot ls
  aenv start warm-python`,
    );

  snapshot
    .command('create')
    .description('snapshot a running sandbox (it keeps running)')
    .argument('<id>', 'sandbox id')
    .option('-n, --name <name>', 'a name for the snapshot')
    .option(
      '--wait',
      'answer once the shared snapshot repository holds it, so that every node can start from it',
    )
    .addHelpText(
      'after',
      '\nA node answers once it can start sandboxes from the snapshot itself; STORED in `aenv snapshot ls`\n' +
        'says when every node sharing its repository can.\n\n' +
        'Example:\n  aenv snapshot create i2k3lf0q8w7x1c9m4n5b --name warm-python',
    )
    .action(async (id: string, opts: { name?: string; wait?: boolean }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const res = await api.post<SnapshotInfo>(
        `/sandboxes/${encodeURIComponent(id)}/snapshots${opts.wait ? '?wait=stored' : ''}`,
        opts.name ? { name: opts.name } : {},
        { feature: 'snapshots (POST /sandboxes/{id}/snapshots)' },
      );
      const s = res.data;
      ctx.out.result(
        s,
        `Created snapshot ${s.snapshotID}${s.names?.length ? ` (${s.names.join(', ')})` : ''} of ${id}`,
      );
    });

  snapshot
    .command('ls')
    .alias('list')
    .description('list snapshots, newest first')
    .option('--sandbox-id <id>', 'only snapshots of this sandbox')
    .option('-n, --name <name>', 'only the snapshot with this name')
    .addHelpText(
      'after',
      '\nExamples:\n  aenv snapshot ls\n  aenv snapshot ls --sandbox-id i2k3lf0q8w7x1c9m4n5b -o json',
    )
    .action(async (opts: { sandboxId?: string; name?: string }, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      const rows = await api.list<SnapshotInfo>(
        '/snapshots',
        { sandboxID: opts.sandboxId, name: opts.name },
        Infinity,
        'snapshots (GET /snapshots)',
      );
      ctx.out.list(rows, SNAPSHOT_COLUMNS);
    });
}

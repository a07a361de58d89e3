import type { Command } from 'commander';
import { contextOf } from '../context.js';
import { formatTime } from '../output/format.js';
import type { Column } from '../output/table.js';

/** A node as GET /nodes reports it (a node alone, or a cluster's gateway from its scheduler). */
export interface NodeInfo {
  nodeID: string;
  status: string;
  version?: string;
  sandboxCount?: number;
  startingSandboxCount?: number;
  pausedSandboxCount?: number;
  allocatedCPU?: number;
  cpuCount?: number;
  allocatedMemoryMiB?: number;
  memoryTotalMiB?: number;
  lastHeartbeat?: string | null;
}

const num = (n: number | undefined) => (n === undefined ? '-' : String(n));

export const NODE_COLUMNS: Column<NodeInfo>[] = [
  { header: 'NODE ID', value: (n) => n.nodeID },
  { header: 'STATUS', value: (n) => n.status },
  { header: 'RUNNING', value: (n) => num(n.sandboxCount), align: 'right' },
  { header: 'STARTING', value: (n) => num(n.startingSandboxCount), align: 'right' },
  { header: 'PAUSED', value: (n) => num(n.pausedSandboxCount), align: 'right' },
  { header: 'CPU', value: (n) => `${num(n.allocatedCPU)}/${num(n.cpuCount)}`, align: 'right' },
  {
    header: 'MEMORY',
    value: (n) => `${num(n.allocatedMemoryMiB)}/${num(n.memoryTotalMiB)} MiB`,
    align: 'right',
  },
  { header: 'VERSION', value: (n) => n.version ?? '-' },
  { header: 'LAST HEARTBEAT', value: (n) => (n.lastHeartbeat ? formatTime(n.lastHeartbeat) : '-') },
];

export function registerNodeCommands(program: Command): void {
  const nodes = program
    .command('nodes')
    .description('the nodes of a cluster (through its gateway) or the node itself')
    .addHelpText('after', '\nExamples:\n  aenv nodes ls\n  aenv nodes ls -o json');
  nodes
    .command('ls')
    .alias('list')
    .description('list nodes with their status and load')
    .addHelpText(
      'after',
      `
Columns: NODE ID, STATUS (ready, draining, connecting, unhealthy), RUNNING, STARTING, PAUSED,
CPU and MEMORY (allocated/total), VERSION, LAST HEARTBEAT. JSON output is GET /nodes as it is.

Examples:
  aenv nodes ls
  aenv nodes ls -o json | jq -r '.[] | select(.status != "ready") | .nodeID'`,
    )
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = contextOf(cmd);
      const api = await ctx.api();
      ctx.out.list(await api.get<NodeInfo[]>('/nodes'), NODE_COLUMNS);
    });
}

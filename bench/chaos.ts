/**
 * Chaos benchmark (issue 24): for a while, clients drive rollouts through the official SDK against
 * a replicated cluster on this machine (Redis with an append-only file, 2 schedulers, 2 gateways,
 * N nodes) while faults land at random: a node SIGKILLed or SIGSTOPped, a gateway, a scheduler
 * replica or Redis SIGKILLed, each brought back a few seconds later. Then everything is healed and
 * the books checked: every sandbox a client was told of is running, paused and resumable, killed, or
 * lost with an infrastructure reason; never two running copies; every snapshot starts a sandbox;
 * the store's bindings match the nodes; nothing is left on the machine. Loopback only; it stops by
 * itself. Exit code 1 on any violation or unexpected client error.
 *
 * Run (as root, after npm run build): npx tsx bench/chaos.ts [--minutes 15] [--clients 3]
 *   [--nodes 3] [--seed N] [--fault-every 20] [--max-down 8]   (seconds)
 */
import { parseArgs } from 'node:util';
import { report } from './chaos/report.js';
import { runChaos } from './chaos/run.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '15' },
    clients: { type: 'string', default: '3' },
    nodes: { type: 'string', default: '3' },
    seed: { type: 'string', default: String(Date.now() % 1_000_000) },
    'fault-every': { type: 'string', default: '20' },
    'max-down': { type: 'string', default: '8' },
  },
});

const minutes = Number(values.minutes);
const started = Date.now();
console.log(`seed ${values.seed}; ${values.nodes} nodes, ${values.clients} clients, ${minutes} min`);
const result = await runChaos({
  durationMs: minutes * 60_000,
  clients: Number(values.clients),
  nodes: Number(values.nodes),
  seed: Number(values.seed),
  faultEveryMs: Number(values['fault-every']) * 1000,
  maxDownMs: Number(values['max-down']) * 1000,
  log: (l) => console.log(`[${((Date.now() - started) / 60_000).toFixed(1)} min] ${l}`),
});
console.log(report(result, (Date.now() - started) / 60_000));
const bad = result.verdict.violations.length + result.books.unexpected.length + result.leftovers.length;
process.exit(bad ? 1 : 0);

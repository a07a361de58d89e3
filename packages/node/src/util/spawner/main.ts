import { createInterface } from 'node:readline';
import { runProcess } from '../subprocess.js';
import { parseRequest, wireOptions, type SpawnerReply } from './protocol.js';

/**
 * The process spawner (see client.ts): runs the programs its parent asks for and answers with
 * their results. It exits once its stdin closes (the parent stopped or died), after SIGTERM to
 * whatever still runs, so it never outlives the node.
 */
const running = new Map<number, AbortController>();
const reply = (r: SpawnerReply) => process.stdout.write(`${JSON.stringify(r)}\n`);

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  const req = parseRequest(line);
  if (typeof req === 'string') {
    process.stderr.write(`aenv-spawner: ignored a request (${req})\n`);
    return;
  }
  if ('cancel' in req) {
    running.get(req.id)?.abort();
    return;
  }
  const abort = new AbortController();
  running.set(req.id, abort);
  runProcess(req.file, req.args, {
    ...wireOptions(req),
    signal: abort.signal,
  })
    .then(
      (result) => reply({ id: req.id, result }),
      (err: NodeJS.ErrnoException) =>
        reply({ id: req.id, error: { message: err.message, ...(err.code ? { code: err.code } : {}) } }),
    )
    .finally(() => running.delete(req.id));
});
const stopAll = () => {
  for (const abort of running.values()) abort.abort();
};
lines.on('close', stopAll);
// A reply that cannot be written: the parent is gone, and so is any use for what still runs.
process.stdout.on('error', stopAll);

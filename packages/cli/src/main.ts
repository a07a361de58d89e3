import { CommanderError } from 'commander';
import { buildProgram } from './program.js';
import { CliError, describeError, EXIT } from './errors.js';

/** Waits until everything written to stdout/stderr is flushed (pipes are asynchronous). */
function flush(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || !stream.writable) return resolve();
    stream.write('', () => resolve());
  });
}

async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version requests end as "errors" with code 0; usage errors were printed already.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    process.stderr.write(`aenv: ${describeError(err)}\n`);
    if (process.env.AENV_DEBUG && err instanceof Error && !(err instanceof CliError))
      process.stderr.write(`${err.stack}\n`);
    return err instanceof CliError ? err.exitCode : EXIT.error;
  }
}

// A closed pipe on stdout (`aenv ls | head -1`) is not an error worth a stack trace.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(EXIT.ok);
  throw err;
});

const code = await main(process.argv);
await Promise.all([flush(process.stdout), flush(process.stderr)]);
// Sockets kept alive by the HTTP agents must not hold the process open.
process.exit(code);

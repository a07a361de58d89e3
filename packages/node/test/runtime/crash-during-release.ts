/**
 * A node that dies during a background release: boots a sandbox with a tmpfs-backed writable
 * layer (so its bundle holds a mount), kills it, and SIGKILLs itself as soon as kill() resolved,
 * while the release (runsc state, cgroups, the mount, the bundle) has only just begun. Prints the
 * sandbox id first. Run by gvisor-lifecycle.test.ts with AENV_CRASH_* in the environment.
 */
import { GvisorDriver } from '../../src/runtime/gvisor/driver.js';
import type { StartRequest } from '../../src/runtime/driver.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const driver = new GvisorDriver({ runtimeDir: env('AENV_CRASH_RUNTIME_DIR'), upper: 'tmpfs' });
const boot = JSON.parse(env('AENV_CRASH_BOOT')) as StartRequest;
const h = await driver.start(boot);
process.stdout.write(`${h.id}\n`);
await driver.kill(h);
process.kill(process.pid, 'SIGKILL');

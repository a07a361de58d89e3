import { eventually } from '../eventually.js';

/** Waits until `ok` answers true; fails as soon as the process exits instead. */
export async function untilReady(
  ok: () => Promise<boolean>,
  exited: Promise<void>,
  why: () => string,
  timeoutMs = 20_000,
): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  await eventually(
    async () => {
      if (!gone && !(await ok())) throw new Error(why());
    },
    { timeoutMs },
  );
  if (gone) throw new Error(`exited before it was ready: ${why()}`);
}

/**
 * Waits, turn by turn of the event loop, until `cond` holds: for work the fakes finish in a few
 * turns (a warm-pool refill). Fails after `turns` turns, naming `what`.
 */
export async function until(cond: () => boolean, what = 'the condition', turns = 1000): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`${what} did not hold within ${turns} turns of the event loop`);
}

/** What `p` rejects with; a fulfilled promise is a failure of the test. */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail, and it succeeded');
}

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

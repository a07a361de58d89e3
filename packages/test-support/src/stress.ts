/**
 * How many rounds a stress test runs: `short` in the suite, where the first few rounds find what
 * more of them would; `long` with AENV_TEST_STRESS=1, to hunt a race that needs many.
 */
export function stressRounds(short: number, long: number): number {
  return process.env.AENV_TEST_STRESS === '1' ? long : short;
}

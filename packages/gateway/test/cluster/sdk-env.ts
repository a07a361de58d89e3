import { TEST_CLUSTER_KEY as API_KEY } from '@agentenv/test-support/cluster';

/** Points the E2B SDK at the gateway only, as a trainer would. */
export function useGateway(url: string): void {
  process.env.E2B_API_URL = url;
  process.env.E2B_SANDBOX_URL = url;
  process.env.E2B_VOLUME_API_URL = url;
  process.env.E2B_API_KEY = API_KEY;
  delete process.env.E2B_DEBUG;
  delete process.env.E2B_DOMAIN;
}

/** Runs `work` over `items` with at most `n` at once (the machine has 2 cores). */
export async function inBatches<T, R>(items: T[], n: number, work: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await work(items[i]!);
      }
    }),
  );
  return out;
}

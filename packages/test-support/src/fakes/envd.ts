import type { EnvdApi, EnvdConnector } from '@agentenv/node';
import type { EnvdInit, EnvdMetrics } from '@agentenv/protocol';
import { Faults } from './faults.js';

export type EnvdStep = 'init' | 'metrics' | 'health';

/** envd as the node talks to it: /init calls recorded, /metrics a fixed sample. */
export class FakeEnvd {
  readonly faults = new Faults<EnvdStep>((s) => new Error(`fake envd: ${s} answered 500`));
  readonly inits: { host: string; port: number; init: EnvdInit; token?: string }[] = [];

  readonly connect: EnvdConnector = (host, port): EnvdApi => ({
    health: async () => {
      await this.faults.check('health');
      return 204;
    },
    init: async (init, token) => {
      await this.faults.check('init');
      this.inits.push({ host, port, init, ...(token ? { token } : {}) });
    },
    metrics: async (): Promise<EnvdMetrics> => {
      await this.faults.check('metrics');
      return {
        ts: 1,
        cpu_count: 2,
        cpu_used_pct: 1.5,
        mem_total: 2 ** 30,
        mem_used: 2 ** 28,
        disk_used: 1,
        disk_total: 2,
      };
    },
    exec: async () => {
      throw new Error('fake envd: exec is not faked');
    },
    writeFile: async () => {
      throw new Error('fake envd: writeFile is not faked');
    },
    readFile: async () => {
      throw new Error('fake envd: readFile is not faked');
    },
  });

  /** The /init a sandbox got, by its host-side address. */
  initOf(host: string): EnvdInit | undefined {
    return this.inits.filter((i) => i.host === host).at(-1)?.init;
  }
}

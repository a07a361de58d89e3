/**
 * The fault injector of a chaos run: at random times it SIGKILLs or SIGSTOPs a random node,
 * gateway, scheduler replica or Redis, and brings it back (restart, or SIGCONT) a few seconds
 * later, one fault at a time so the cluster always has a way to answer.
 */
import type { TestCluster } from '@agentenv/test-support/cluster';

export type FaultKind = 'node-kill' | 'node-stop' | 'gateway-kill' | 'scheduler-kill' | 'redis-kill';
export const FAULT_KINDS: readonly FaultKind[] = [
  'node-kill',
  'node-stop',
  'gateway-kill',
  'scheduler-kill',
  'redis-kill',
];

export interface FaultLog {
  at: number;
  kind: FaultKind;
  target: string;
  downMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface InjectorOptions {
  cluster: TestCluster;
  nodes: number;
  random: () => number;
  /** Mean time between faults. */
  everyMs: number;
  /** How long a target stays down, at most. */
  maxDownMs: number;
}

export class FaultInjector {
  readonly log: FaultLog[] = [];
  /** Faults whose target is back. */
  healed = 0;
  /** False once injecting ended: stopped, or a fault failed (stop() throws its error). */
  active = false;
  private stopped = false;
  private done?: Promise<void>;

  constructor(private readonly o: InjectorOptions) {}

  start(): void {
    this.active = true;
    this.done = this.loop().finally(() => (this.active = false));
  }

  /** Stops injecting; resolves once the fault in progress is healed. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }

  /**
   * Kinds are drawn from a shuffled deck, so a short run still sees each kind once before any
   * repeats.
   */
  private async loop(): Promise<void> {
    let deck: FaultKind[] = [];
    while (!this.stopped) {
      await sleep(this.o.everyMs * (0.5 + this.o.random()));
      if (this.stopped) return;
      if (!deck.length) deck = shuffle([...FAULT_KINDS], this.o.random);
      await this.inject(deck.pop()!);
      this.healed++;
    }
  }

  private async inject(kind: FaultKind): Promise<void> {
    const c = this.o.cluster;
    const downMs = Math.round(this.o.maxDownMs * (0.3 + 0.7 * this.o.random()));
    const pick = (n: number) => Math.floor(this.o.random() * n);
    const entry = (target: string) => this.log.push({ at: Date.now(), kind, target, downMs });
    switch (kind) {
      case 'node-kill': {
        const i = pick(this.o.nodes);
        entry(`node ${i}`);
        await c.stopNode(i, 'SIGKILL');
        await sleep(downMs);
        await c.startNode(i);
        return;
      }
      case 'node-stop': {
        const i = pick(this.o.nodes);
        const child = c.nodes[i]?.child;
        if (!child) return;
        entry(`node ${i}`);
        child.kill('SIGSTOP');
        await sleep(downMs);
        child.kill('SIGCONT');
        return;
      }
      case 'gateway-kill': {
        const k = pick(c.gatewayUrls.length);
        entry(`gateway ${k}`);
        await c.stopGateway(k, 'SIGKILL');
        await sleep(downMs);
        await c.startGateway(k);
        return;
      }
      case 'scheduler-kill': {
        const k = pick(c.gatewayUrls.length);
        entry(`scheduler ${k}`);
        await c.stopScheduler('SIGKILL', k);
        await sleep(downMs);
        await c.startScheduler(k);
        return;
      }
      case 'redis-kill':
        entry('redis');
        await c.stopRedis('SIGKILL');
        await sleep(downMs);
        await c.startRedisAgain();
        return;
    }
  }
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

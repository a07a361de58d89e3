/**
 * One chaos client: rollouts through the official SDK (create, commands, files, pause, resume,
 * fork, snapshot, kill) spread over the gateways, retrying what the platform says is retryable
 * and recording what it was told of every sandbox.
 */
import { Sandbox } from 'e2b';
import type { Told } from './invariants.js';

export interface Books {
  /** What clients were last told of each sandbox. */
  told: Map<string, Told>;
  /** Snapshots clients were told exist. */
  snapshots: Set<string>;
  /** Operations done, by kind. */
  ops: Map<string, number>;
  /** Client-visible errors, by `op:class` (class: retryable kind, `loss` or `unexpected`). */
  errors: Map<string, number>;
  /** What went wrong that no rule allows, one line each. */
  unexpected: string[];
}

export const newBooks = (): Books => ({
  told: new Map(),
  snapshots: new Set(),
  ops: new Map(),
  errors: new Map(),
  unexpected: [],
});

const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

export interface ClientOptions {
  gateways: string[];
  apiKey: string;
  random: () => number;
  books: Books;
  /** Asks the cluster what became of a sandbox (its state and reason), for a failed operation. */
  fate(id: string): Promise<{ state: string; reason?: string }>;
}

/** How an error reads to a client that retries what it may. */
export function classify(err: unknown): 'retryable' | 'gone' | 'unexpected' {
  const e = err as { name?: string; message?: string; statusCode?: number; cause?: { code?: string } };
  const text = `${e.name ?? ''} ${e.message ?? ''} ${e.cause?.code ?? ''}`;
  // A stream cut when its node went away (Connect `unavailable`): the sandbox may live on.
  if (/the connection to (node|sandbox) \S+ was lost/i.test(text)) return 'retryable';
  if (/\b(410)\b|lost|node failure/i.test(text)) return 'gone';
  // The SDK's reading of a 502 for a sandbox whose node is away: until the cluster decides (the
  // node back, or the sandbox lost), that is worth another try.
  if (
    /ServiceBusy|RateLimit|Timeout|not running anymore|\b(429|502|503|504)\b|fetch failed|ECONN|EPIPE|socket|other side closed|terminated|aborted|unavailable|deadline/i.test(
      text,
    )
  )
    return 'retryable';
  if (/NotFound|\b404\b|not found/i.test(text)) return 'gone';
  return 'unexpected';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ATTEMPTS = 8;

export class ChaosClient {
  private turn = 0;

  constructor(private readonly o: ClientOptions) {}

  private via(): { apiUrl: string; sandboxUrl: string; apiKey: string; requestTimeoutMs: number } {
    const url = this.o.gateways[this.turn++ % this.o.gateways.length]!;
    return { apiUrl: url, sandboxUrl: url, apiKey: this.o.apiKey, requestTimeoutMs: 20_000 };
  }

  /**
   * Runs `work` until it succeeds, retrying retryable errors on the next gateway with backoff.
   * Undefined when the sandbox `id` is gone with a reason the platform documents (its node
   * failed), or when no answer came: then the final check judges what the cluster says.
   */
  private async attempt<T>(
    op: string,
    id: string | undefined,
    work: (via: ReturnType<ChaosClient['via']>) => Promise<T>,
  ): Promise<T | undefined> {
    bump(this.o.books.ops, op);
    for (let n = 0; ; n++) {
      try {
        return await work(this.via());
      } catch (err) {
        const kind = classify(err);
        bump(this.o.books.errors, `${op}:${kind}`);
        if (kind === 'retryable' && n + 1 < ATTEMPTS) {
          await sleep(Math.min(4_000, 250 * 2 ** n));
          continue;
        }
        if (id) {
          const fate = await this.o.fate(id).catch(() => ({ state: 'unknown' }));
          if (fate.state === 'lost' || fate.state === 'absent') return undefined;
        }
        if (kind === 'retryable') return undefined;
        this.o.books.unexpected.push(`${op} ${id ?? ''}: ${(err as Error).message}`);
        return undefined;
      }
    }
  }

  /** One rollout: a sandbox used, maybe paused and resumed, forked or snapshotted, then mostly killed. */
  async rollout(): Promise<void> {
    const { books, random } = this.o;
    const created = await this.attempt('create', undefined, (via) =>
      Sandbox.create({ ...via, timeoutMs: 1_800_000 }),
    );
    if (!created) return;
    const id = created.sandboxId;
    books.told.set(id, 'running');
    const use = async (label: string) =>
      this.attempt(label, id, async (via) => {
        const s = await Sandbox.connect(id, { ...via, timeoutMs: 1_800_000 });
        books.told.set(id, 'running');
        const token = Math.floor(random() * 1e9).toString();
        await s.files.write('/home/user/chaos.txt', token);
        const r = await s.commands.run('cat /home/user/chaos.txt', { timeoutMs: 20_000 });
        if (r.stdout !== token) throw new Error(`read ${JSON.stringify(r.stdout)}, wrote ${token}`);
        return s;
      });
    if (!(await use('command'))) return;
    if (random() < 0.35) {
      const paused = await this.attempt('pause', id, async (via) => {
        try {
          await Sandbox.pause(id, via);
        } catch (err) {
          // A retried pause whose first try went through finds it paused already.
          if (!/409|already paused|not running/i.test((err as Error).message)) throw err;
        }
        return true;
      });
      if (!paused) return;
      books.told.set(id, 'paused');
      if (random() < 0.7 && !(await use('resume'))) return;
    }
    if (books.told.get(id) === 'running' && random() < 0.15) {
      const children = await this.attempt('fork', id, async (via) => {
        const made = await Sandbox.fork(id, { ...via, count: 2 });
        return made.filter((c): c is Sandbox => c instanceof Sandbox);
      });
      for (const c of children ?? []) {
        books.told.set(c.sandboxId, 'running');
        await this.kill(c.sandboxId);
      }
    }
    if (books.told.get(id) === 'running' && random() < 0.1) {
      const snap = await this.attempt('snapshot', id, (via) => Sandbox.createSnapshot(id, via));
      if (snap) books.snapshots.add(snap.snapshotId);
    }
    if (random() < 0.8) await this.kill(id);
  }

  private async kill(id: string): Promise<void> {
    const done = await this.attempt('kill', id, async (via) => {
      await Sandbox.kill(id, via);
      return true;
    });
    // A kill whose answer was lost may have gone through: the cluster no longer knows the sandbox.
    const gone = done || (await this.o.fate(id).catch(() => ({ state: 'unknown' }))).state === 'absent';
    if (gone) this.o.books.told.set(id, 'killed');
  }
}

/** A call the test holds at its step until it lets it go on (or fail). */
export interface Hold {
  /** Resolves once a call has reached the step and is waiting. */
  readonly reached: Promise<void>;
  /** Lets the held call go on. */
  release(): void;
  /** Makes the held call fail with `err`. */
  fail(err: Error): void;
}

interface Planned {
  err?: Error;
  hold?: { reached: () => void; gate: Promise<void> };
  always: boolean;
}

/**
 * Failure injection for fakes: each fake calls `check(op)` at the step `op` names, and a test
 * says beforehand what that step does: fail once, fail every time, or wait until released. Calls
 * are counted per step.
 */
export class Faults<Op extends string> {
  private readonly plans = new Map<Op, Planned[]>();
  private readonly counts = new Map<Op, number>();

  constructor(private readonly defaultError: (op: Op) => Error) {}

  /** The next call of `op` fails (with `err`, else the fake's usual error for that step). */
  failNext(op: Op, err?: Error): this {
    return this.plan(op, { ...(err ? { err } : {}), always: false });
  }

  /** Every call of `op` fails until `clear(op)`. */
  failAlways(op: Op, err?: Error): this {
    return this.plan(op, { ...(err ? { err } : {}), always: true });
  }

  /** The next call of `op` waits at its step until the test releases it. */
  hold(op: Op): Hold {
    let reached!: () => void;
    let release!: () => void;
    let fail!: (e: Error) => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    const gate = new Promise<void>((res, rej) => {
      release = res;
      fail = rej;
    });
    this.plan(op, { hold: { reached, gate }, always: false });
    return { reached: reachedP, release, fail };
  }

  clear(op?: Op): void {
    if (op) this.plans.delete(op);
    else this.plans.clear();
  }

  /** How often `op` was called. */
  calls(op: Op): number {
    return this.counts.get(op) ?? 0;
  }

  /** Called by the fake at the step: counts it, then fails or waits as planned. */
  async check(op: Op): Promise<void> {
    this.counts.set(op, this.calls(op) + 1);
    const list = this.plans.get(op);
    const next = list?.[0];
    if (!next) return;
    if (!next.always) list.shift();
    if (next.hold) {
      next.hold.reached();
      await next.hold.gate;
      return;
    }
    throw next.err ?? this.defaultError(op);
  }

  private plan(op: Op, p: Planned): this {
    const list = this.plans.get(op) ?? [];
    list.push(p);
    this.plans.set(op, list);
    return this;
  }
}

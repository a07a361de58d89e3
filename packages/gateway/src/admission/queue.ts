import { DomainError } from '@agentenv/common';

export interface AdmissionOptions {
  /** Creates forwarded to nodes at once. */
  maxInFlight: number;
  /** Creates waiting for one of those places; past this they are refused at once. */
  maxWaiting: number;
  /** How long one may wait before it is refused. */
  maxWaitMs: number;
  /** Retry-After (seconds) sent with a refusal. */
  retryAfterSecs: number;
}

interface Waiter {
  grant: (release: () => void) => void;
  refuse: (err: DomainError) => void;
  timer: NodeJS.Timeout;
}

/**
 * The gateway's bounded wait queue for creates: a short burst waits its turn (first come, first
 * served) instead of piling onto the nodes; beyond the queue's length or wait time a create is
 * refused with 429 + Retry-After, never left hanging.
 */
export class AdmissionQueue {
  private inFlight = 0;
  private readonly waiting: Waiter[] = [];
  /** Most creates waiting at once since start, for the bench and /metrics. */
  peakWaiting = 0;

  constructor(private readonly o: AdmissionOptions) {}

  get depth(): number {
    return this.waiting.length;
  }

  get active(): number {
    return this.inFlight;
  }

  /** Resolves with a release function once the create may go on. */
  acquire(): Promise<() => void> {
    if (this.inFlight < this.o.maxInFlight && this.waiting.length === 0) return Promise.resolve(this.grant());
    if (this.waiting.length >= this.o.maxWaiting)
      return Promise.reject(this.refusal(`${this.o.maxWaiting} creates are already waiting`));
    return new Promise((grant, refuse) => {
      const w: Waiter = {
        grant,
        refuse,
        timer: setTimeout(() => {
          const i = this.waiting.indexOf(w);
          if (i >= 0) this.waiting.splice(i, 1);
          refuse(this.refusal(`no create slot within ${this.o.maxWaitMs} ms`));
        }, this.o.maxWaitMs),
      };
      this.waiting.push(w);
      this.peakWaiting = Math.max(this.peakWaiting, this.waiting.length);
    });
  }

  private refusal(why: string): DomainError {
    return new DomainError('capacity', `the cluster is busy: ${why}; retry later`, this.o.retryAfterSecs);
  }

  private grant(): () => void {
    this.inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      const next = this.waiting.shift();
      if (next) {
        clearTimeout(next.timer);
        next.grant(this.grant());
      }
    };
  }
}

import { AsyncQueue } from '../streams.js';
import type { ProcessOutput } from './events.js';

/**
 * One consumer of a process's output. It counts the bytes it holds so the process can stop
 * reading from the child while a consumer is behind (backpressure) instead of buffering
 * without bound.
 */
export class Subscriber implements AsyncIterable<ProcessOutput> {
  private readonly queue = new AsyncQueue<ProcessOutput>();
  backlog = 0;

  constructor(private readonly onDrain: () => void) {}

  push(ev: ProcessOutput): void {
    if (ev.kind === 'data') this.backlog += ev.data.length;
    this.queue.push(ev);
  }

  close(error?: unknown): void {
    this.queue.close(error);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ProcessOutput> {
    for await (const ev of this.queue) {
      if (ev.kind === 'data') {
        this.backlog -= ev.data.length;
        this.onDrain();
      }
      yield ev;
    }
  }
}

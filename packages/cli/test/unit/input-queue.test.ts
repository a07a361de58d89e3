import { describe, expect, it } from 'vitest';
import { InputQueue } from '../../src/terminal/input-queue.js';

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('InputQueue', () => {
  it('sends nothing before open, then everything in order', async () => {
    const sent: string[] = [];
    const q = new InputQueue(
      async (c) => void sent.push(Buffer.from(c).toString()),
      () => undefined,
    );
    q.push(Buffer.from('a'));
    q.push(Buffer.from('b'));
    await tick();
    expect(sent).toEqual([]);
    q.open();
    await q.idle();
    expect(sent).toEqual(['ab']);
  });

  it('merges chunks that arrive while a request is in flight', async () => {
    const sent: string[] = [];
    let release!: () => void;
    const q = new InputQueue(
      (c) => {
        sent.push(Buffer.from(c).toString());
        return sent.length === 1 ? new Promise<void>((r) => (release = r)) : Promise.resolve();
      },
      () => undefined,
    );
    q.open();
    q.push(Buffer.from('1'));
    await tick();
    q.push(Buffer.from('2'));
    q.push(Buffer.from('3'));
    release();
    await q.idle();
    expect(sent).toEqual(['1', '23']);
  });

  it('splits large input into bounded requests and reports fullness', async () => {
    const sizes: number[] = [];
    let drained = 0;
    const q = new InputQueue(
      async (c) => void sizes.push(c.length),
      () => undefined,
      10,
      4,
      () => drained++,
    );
    q.push(Buffer.alloc(11));
    expect(q.full).toBe(true);
    q.open();
    await q.idle();
    expect(sizes).toEqual([4, 4, 3]);
    expect(drained).toBe(1);
    expect(q.full).toBe(false);
  });

  it('stops after a failed send and reports the error once', async () => {
    const errors: unknown[] = [];
    const q = new InputQueue(
      async () => {
        throw new Error('gone');
      },
      (e) => errors.push(e),
    );
    q.open();
    q.push(Buffer.from('x'));
    await q.idle();
    q.push(Buffer.from('y'));
    await q.idle();
    expect(errors).toHaveLength(1);
  });
});

import { describe, expect, it } from 'vitest';
import { connectEnvelope, connectMessages } from '@agentenv/test-support';
import { endStreamEnvelope, EnvelopeFramer } from '../../src/connect-stream.js';

describe('EnvelopeFramer', () => {
  it('passes whole envelopes only, however the bytes are split', () => {
    const bytes = Buffer.concat([
      connectEnvelope({ a: 1 }),
      connectEnvelope({ b: 'two' }),
      connectEnvelope({}, 2),
    ]);
    for (const size of [1, 3, 5, 7, bytes.length]) {
      const framer = new EnvelopeFramer();
      const out: Buffer[] = [];
      for (let i = 0; i < bytes.length; i += size) {
        const whole = framer.take(bytes.subarray(i, i + size));
        // Every piece passed on ends on a boundary.
        if (whole.length) expect(() => connectMessages(whole)).not.toThrow();
        out.push(whole);
      }
      expect(Buffer.concat(out)).toEqual(bytes);
      expect(framer.rest().length).toBe(0);
    }
    const framer = new EnvelopeFramer();
    expect(framer.take(bytes.subarray(0, 9)).length).toBe(0);
    expect(framer.rest().length).toBe(9);
  });

  it('ends a stream with an end-of-stream envelope carrying the error', () => {
    expect(connectMessages(endStreamEnvelope('unavailable', 'gone'))).toEqual([
      [2, { error: { code: 'unavailable', message: 'gone' } }],
    ]);
  });
});

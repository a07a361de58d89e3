import { describe, expect, it } from 'vitest';
import { EventStreamParser, formatEvent } from '../../src/shared/sse.js';

describe('event stream parsing', () => {
  it('reads back what formatEvent wrote, however the text is split', () => {
    const wire = formatEvent('sandbox', { id: 'a' }) + ': keepalive\n\n' + formatEvent('stage', { ms: 5 });
    for (let cut = 0; cut <= wire.length; cut++) {
      const p = new EventStreamParser();
      const got = [...p.push(wire.slice(0, cut)), ...p.push(wire.slice(cut))];
      expect(got).toEqual([
        { event: 'sandbox', data: '{"id":"a"}' },
        { event: 'stage', data: '{"ms":5}' },
      ]);
    }
  });

  it('joins multi-line data, accepts CRLF split across chunks, and defaults the event name', () => {
    const p = new EventStreamParser();
    expect(p.push('data: one\r')).toEqual([]);
    expect(p.push('\ndata:two\r\n\r\n')).toEqual([{ event: 'message', data: 'one\ntwo' }]);
  });

  it('ignores events without data and unknown fields', () => {
    const p = new EventStreamParser();
    expect(p.push('event: x\nid: 3\n\nretry: 10\n\n')).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import {
  ackPayload,
  encodeFrame,
  FrameDecoder,
  FrameType,
  jsonFrame,
  parseRequest,
  SudoRefusal,
} from '../../src/sudo/protocol.js';

describe('sudo framing', () => {
  it('encodes a type byte, a big-endian length and the payload', () => {
    expect([...encodeFrame(FrameType.stdin, 'hi')]).toEqual([2, 0, 0, 0, 2, 0x68, 0x69]);
    expect([...encodeFrame(FrameType.stdin)]).toEqual([2, 0, 0, 0, 0]);
    expect([...ackPayload(258)]).toEqual([0, 0, 1, 2]);
  });

  it('decodes frames whatever the chunk boundaries', () => {
    const binary = Buffer.from([0, 1, 2, 255, 0x0a]);
    const stream = Buffer.concat([
      encodeFrame(FrameType.stdout, binary),
      encodeFrame(FrameType.stdin),
      jsonFrame(FrameType.exit, { code: 3 }),
    ]);
    for (const size of [1, 2, 3, 5, 7, stream.length]) {
      const decoder = new FrameDecoder();
      const frames = [];
      for (let i = 0; i < stream.length; i += size)
        frames.push(...decoder.push(stream.subarray(i, i + size)));
      expect(frames.map((f) => f.type)).toEqual([FrameType.stdout, FrameType.stdin, FrameType.exit]);
      expect(frames[0]!.payload).toEqual(binary);
      expect(frames[1]!.payload.length).toBe(0);
      expect(JSON.parse(frames[2]!.payload.toString())).toEqual({ code: 3 });
      expect(decoder.pending).toBe(0);
    }
  });

  it('assembles a large frame from many chunks', () => {
    const big = Buffer.alloc(3 << 20, 7);
    const frame = encodeFrame(FrameType.stdin, big);
    const decoder = new FrameDecoder();
    const out = [];
    for (let i = 0; i < frame.length; i += 65536) out.push(...decoder.push(frame.subarray(i, i + 65536)));
    expect(out).toHaveLength(1);
    expect(out[0]!.payload.equals(big)).toBe(true);
  });

  it('refuses a frame over the limit before buffering it', () => {
    const decoder = new FrameDecoder(10);
    expect(() => decoder.push(encodeFrame(FrameType.stdin, Buffer.alloc(11)).subarray(0, 5))).toThrow(
      /limit/,
    );
  });
});

describe('parseRequest', () => {
  const base = { action: 'run', argv: ['id'], env: { A: 'b' }, cwd: '/' };
  const parse = (v: unknown) => parseRequest(Buffer.from(JSON.stringify(v)));

  it('accepts a well-formed request', () => {
    const full = {
      ...base,
      user: 'bob',
      group: 'adm',
      login: false,
      shell: true,
      setHome: true,
      preserveEnv: ['A'],
      assignments: { X: '1' },
      chdir: '/tmp',
      tty: { cols: 80, rows: 24 },
    };
    expect(parse(full)).toEqual(full);
  });

  it('refuses malformed ones', () => {
    expect(() => parseRequest(Buffer.from('{'))).toThrow(SudoRefusal);
    for (const bad of [
      null,
      [],
      { ...base, action: 'rm' },
      { ...base, argv: 'id' },
      { ...base, argv: [1] },
      { ...base, env: { A: 1 } },
      { ...base, cwd: undefined },
      { ...base, user: 0 },
      { ...base, preserveEnv: 'A' },
      { ...base, tty: { cols: '80', rows: 24 } },
    ]) {
      expect(() => parse(bad), JSON.stringify(bad)).toThrow(/malformed/);
    }
  });
});

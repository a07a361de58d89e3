import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  authToken,
  decodeBitmap,
  decodeChunk,
  decodeRequest,
  decodeResponse,
  encodeBitmap,
  encodeChunk,
  encodeRequest,
  encodeResponse,
  MAX_HAVE,
  Op,
  ProtocolError,
  Status,
  tokenMatches,
} from '../../src/protocol.js';

const h = () => randomBytes(32).toString('hex');

describe('p2p chunk protocol', () => {
  it('round-trips requests', () => {
    const token = authToken('key', 'a', 'b');
    const hashes = [h(), h(), h()];
    expect(decodeRequest(encodeRequest({ op: Op.HAVE, token, hashes }))).toEqual({
      op: Op.HAVE,
      token,
      hashes,
    });
    const one = [h()];
    expect(decodeRequest(encodeRequest({ op: Op.GET, token, hashes: one })).hashes).toEqual(one);
  });

  it('refuses malformed requests with a ProtocolError', () => {
    const token = authToken('key', 'a', 'b');
    const good = encodeRequest({ op: Op.HAVE, token, hashes: [h(), h()] });
    const bad = (mutate: (b: Buffer) => Buffer) => () => decodeRequest(mutate(Buffer.from(good)));
    expect(bad((b) => b.subarray(0, 10))).toThrow(ProtocolError);
    expect(bad((b) => ((b[0] = 9), b))).toThrow(/version/);
    expect(bad((b) => ((b[1] = 7), b))).toThrow(/op/);
    expect(bad((b) => b.subarray(0, b.length - 1))).toThrow(/length/);
    expect(bad((b) => (b.writeUInt32BE(MAX_HAVE + 1, 34), b))).toThrow(/count/);
    expect(bad((b) => ((b[1] = Op.GET), b))).toThrow(/count/);
    expect(() => encodeRequest({ op: Op.GET, token, hashes: [h(), h()] })).toThrow(ProtocolError);
    expect(() => encodeRequest({ op: Op.HAVE, token, hashes: ['nothex'] })).toThrow(/hash/);
    expect(() => encodeRequest({ op: Op.HAVE, token, hashes: [] })).toThrow(ProtocolError);
  });

  it('binds tokens to the key and to both endpoints', () => {
    const t = authToken('key', 'client', 'server');
    expect(tokenMatches(t, authToken('key', 'client', 'server'))).toBe(true);
    expect(tokenMatches(t, authToken('other', 'client', 'server'))).toBe(false);
    expect(tokenMatches(t, authToken('key', 'server', 'client'))).toBe(false);
    expect(tokenMatches(t, authToken('key', 'client', 'other'))).toBe(false);
    expect(tokenMatches(t, Buffer.alloc(5))).toBe(false);
  });

  it('round-trips responses and bitmaps', () => {
    const payload = randomBytes(100);
    expect(decodeResponse(encodeResponse(Status.OK, payload))).toEqual({ status: Status.OK, payload });
    expect(decodeResponse(encodeResponse(Status.UNAUTHORIZED)).payload.length).toBe(0);
    expect(() => decodeResponse(Buffer.of(99))).toThrow(ProtocolError);
    expect(() => decodeResponse(Buffer.alloc(0))).toThrow(ProtocolError);
    const bits = Array.from({ length: 19 }, (_, i) => i % 3 === 0);
    expect(decodeBitmap(encodeBitmap(bits), bits.length)).toEqual(bits);
    expect(() => decodeBitmap(Buffer.alloc(1), 19)).toThrow(ProtocolError);
  });

  it('deflates chunks that shrink, sends the others as they are, and bounds what it inflates', () => {
    const text = Buffer.from('memory page '.repeat(6000));
    const packed = decodeResponse(encodeChunk(text));
    expect(packed.status).toBe(Status.OK_DEFLATE);
    expect(packed.payload.length).toBeLessThan(text.length / 4);
    expect(decodeChunk(packed.status, packed.payload, text.length).equals(text)).toBe(true);
    const random = randomBytes(65536);
    const raw = decodeResponse(encodeChunk(random));
    expect(raw.status).toBe(Status.OK);
    expect(decodeChunk(raw.status, raw.payload, random.length).equals(random)).toBe(true);
    expect(() => decodeChunk(packed.status, packed.payload, 1000)).toThrow(ProtocolError);
    expect(() => decodeChunk(Status.OK_DEFLATE, Buffer.of(0xff, 0xff, 0xff), 1000)).toThrow(ProtocolError);
  });
});

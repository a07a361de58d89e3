import { createHmac, timingSafeEqual } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';

/**
 * The chunk exchange spoken between nodes, one request and one response per QUIC stream, on the
 * ALPN below (the endpoint accepts no other). Pure encoding and checks; no I/O.
 *
 *   request  = version:u8 op:u8 token:32 count:u32be hash:32 × count
 *   response = status:u8 payload
 *     HAVE → a bitmap, bit i (LSB first within each byte) set when the peer holds hash i
 *     GET  → the chunk's bytes (count must be 1); OK_DEFLATE: deflated (raw), when that is smaller
 *
 * The token proves the requester knows the cluster's API key without sending it: an HMAC of both
 * endpoint ids under the key. QUIC's handshake already proves each side holds its endpoint's
 * secret key, so a token is bound to one pair of endpoints and useless to anyone else.
 */
export const ALPN = 'aenv/chunks/1';
export const VERSION = 1;

export const Op = { HAVE: 1, GET: 2 } as const;
export type Op = (typeof Op)[keyof typeof Op];

export const Status = {
  OK: 0,
  UNAUTHORIZED: 1,
  NOT_FOUND: 2,
  BAD_REQUEST: 3,
  BUSY: 4,
  OK_DEFLATE: 5,
} as const;
export type Status = (typeof Status)[keyof typeof Status];

/** Hashes per HAVE request (256 KiB of request); longer lists are split by the client. */
export const MAX_HAVE = 8192;
const HEADER = 1 + 1 + 32 + 4;
export const MAX_REQUEST_BYTES = HEADER + 32 * MAX_HAVE;

export interface Request {
  readonly op: Op;
  readonly token: Buffer;
  /** Hex sha256 hashes. */
  readonly hashes: readonly string[];
}

export class ProtocolError extends Error {
  override name = 'ProtocolError';
}

export function authToken(apiKey: string, clientId: string, serverId: string): Buffer {
  return createHmac('sha256', apiKey).update(`aenv-p2p/1\0${clientId}\0${serverId}`).digest();
}

export function tokenMatches(expected: Buffer, given: Buffer): boolean {
  return given.length === expected.length && timingSafeEqual(expected, given);
}

const HEX64 = /^[0-9a-f]{64}$/;

export function encodeRequest(req: Request): Buffer {
  if (req.token.length !== 32) throw new ProtocolError('token must be 32 bytes');
  if (req.hashes.length < 1 || req.hashes.length > MAX_HAVE)
    throw new ProtocolError(`a request carries 1–${MAX_HAVE} hashes`);
  if (req.op === Op.GET && req.hashes.length !== 1) throw new ProtocolError('GET asks for one chunk');
  const out = Buffer.alloc(HEADER + 32 * req.hashes.length);
  out[0] = VERSION;
  out[1] = req.op;
  req.token.copy(out, 2);
  out.writeUInt32BE(req.hashes.length, 34);
  req.hashes.forEach((h, i) => {
    if (!HEX64.test(h)) throw new ProtocolError(`bad chunk hash ${JSON.stringify(h)}`);
    out.write(h, HEADER + 32 * i, 'hex');
  });
  return out;
}

export function decodeRequest(data: Buffer): Request {
  if (data.length < HEADER) throw new ProtocolError('request too short');
  if (data[0] !== VERSION) throw new ProtocolError(`unknown protocol version ${data[0]}`);
  const op = data[1];
  if (op !== Op.HAVE && op !== Op.GET) throw new ProtocolError(`unknown op ${op}`);
  const count = data.readUInt32BE(34);
  if (count < 1 || count > MAX_HAVE || (op === Op.GET && count !== 1))
    throw new ProtocolError(`bad hash count ${count}`);
  if (data.length !== HEADER + 32 * count) throw new ProtocolError('request length does not match its count');
  const hashes: string[] = [];
  for (let i = 0; i < count; i++) {
    hashes.push(data.toString('hex', HEADER + 32 * i, HEADER + 32 * (i + 1)));
  }
  return { op, token: Buffer.from(data.subarray(2, 34)), hashes };
}

export function encodeResponse(status: Status, payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([Buffer.of(status), payload]);
}

export function decodeResponse(data: Buffer): { status: Status; payload: Buffer } {
  const status = data[0];
  if (status === undefined || !Object.values(Status).includes(status as Status))
    throw new ProtocolError(`bad response status ${status}`);
  return { status: status as Status, payload: data.subarray(1) };
}

export function encodeBitmap(bits: readonly boolean[]): Buffer {
  const out = Buffer.alloc(Math.ceil(bits.length / 8));
  bits.forEach((b, i) => {
    if (b) out[i >> 3] = (out[i >> 3] ?? 0) | (1 << (i & 7));
  });
  return out;
}

export function decodeBitmap(data: Buffer, count: number): boolean[] {
  if (data.length !== Math.ceil(count / 8)) throw new ProtocolError('bitmap length does not match');
  return Array.from({ length: count }, (_, i) => ((data[i >> 3]! >> (i & 7)) & 1) === 1);
}

/** Compressing a sample first keeps incompressible chunks (random data) cheap to serve. */
const SAMPLE = 4096;

/**
 * A chunk as a GET answer. The binding moves bytes slowly (as arrays of numbers), so shrinking
 * them pays: memory images typically deflate to a fifth at the fastest level.
 */
export function encodeChunk(data: Buffer): Buffer {
  if (data.length > SAMPLE * 2) {
    const sample = deflateRawSync(data.subarray(0, SAMPLE), { level: 1 });
    if (sample.length > SAMPLE * 0.9) return encodeResponse(Status.OK, data);
  }
  const packed = deflateRawSync(data, { level: 1 });
  return packed.length < data.length * 0.9
    ? encodeResponse(Status.OK_DEFLATE, packed)
    : encodeResponse(Status.OK, data);
}

/** The chunk of a GET answer, at most `bytes` long (a longer or undecodable one is a ProtocolError). */
export function decodeChunk(status: Status, payload: Buffer, bytes: number): Buffer {
  if (status === Status.OK) return payload;
  try {
    return inflateRawSync(payload, { maxOutputLength: bytes });
  } catch (e) {
    throw new ProtocolError(`deflated chunk does not decode to ${bytes} bytes: ${(e as Error).message}`);
  }
}

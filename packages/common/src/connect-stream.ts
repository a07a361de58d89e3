import type { IncomingMessage, ServerResponse } from 'node:http';

/** The error a Connect stream ends with (Connect protocol: EndStreamResponse's `error`). */
export interface StreamError {
  code: string;
  message: string;
}

/** Connect's envelope: a flags byte, a big-endian uint32 length, then that many bytes. */
const PREFIX_BYTES = 5;
/** The flag of the envelope that ends a stream (its JSON carries the error, if any). */
const END_STREAM_FLAG = 0x02;

/** Whether an answer is a Connect streaming response (envd's process and watch streams). */
export function isConnectStream(headers: IncomingMessage['headers']): boolean {
  return /^application\/connect\+/i.test(String(headers['content-type'] ?? ''));
}

/** The envelope that ends a Connect stream with an error (Connect protocol: EndStreamResponse). */
export function endStreamEnvelope(code: string, message: string): Buffer {
  const json = Buffer.from(JSON.stringify({ error: { code, message } }));
  const prefix = Buffer.alloc(PREFIX_BYTES);
  prefix.writeUInt8(END_STREAM_FLAG, 0);
  prefix.writeUInt32BE(json.length, 1);
  return Buffer.concat([prefix, json]);
}

/**
 * Cuts a Connect stream's bytes at envelope boundaries: `take` returns the whole envelopes a chunk
 * completes and keeps the rest, so a stream relayed through it can always be ended cleanly.
 */
export class EnvelopeFramer {
  private held: Buffer = Buffer.alloc(0);

  take(chunk: Buffer): Buffer {
    const buf = this.held.length ? Buffer.concat([this.held, chunk]) : chunk;
    let whole = 0;
    while (buf.length - whole >= PREFIX_BYTES) {
      const end = whole + PREFIX_BYTES + buf.readUInt32BE(whole + 1);
      if (end > buf.length) break;
      whole = end;
    }
    this.held = buf.subarray(whole);
    return buf.subarray(0, whole);
  }

  /** What is held of an envelope not yet complete. */
  rest(): Buffer {
    return this.held;
  }
}

/**
 * Relays a Connect streaming answer to the client envelope by envelope, so that however it stops
 * the client's stream ends as a Connect stream does, with an end-of-stream envelope: the SDKs then
 * report an error of the call instead of a broken HTTP body ("incomplete chunked read"). Returns
 * the cut, which ends the client's stream now with its error (a node about to drain a sandbox's
 * connections); an upstream that breaks by itself ends it with `lost`. Used by the node's proxy
 * and the gateway.
 */
export function relayConnectStream(
  up: IncomingMessage,
  res: ServerResponse,
  lost: StreamError,
): (error: StreamError) => void {
  const framer = new EnvelopeFramer();
  let done = false;
  const cut = (error: StreamError) => {
    if (done || res.writableEnded || res.destroyed) return;
    done = true;
    up.pause();
    res.end(endStreamEnvelope(error.code, error.message));
  };
  up.on('data', (chunk: Buffer) => {
    if (done) return;
    const whole = framer.take(chunk);
    if (whole.length && !res.write(whole)) up.pause();
  });
  res.on('drain', () => {
    if (!done) up.resume();
  });
  up.on('end', () => {
    if (done) return;
    done = true;
    res.end(framer.rest());
  });
  up.on('error', () => undefined);
  up.on('close', () => cut(lost));
  return cut;
}

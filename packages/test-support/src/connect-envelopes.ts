/** A Connect envelope of a JSON message (`flags` 2: the end of a stream). */
export function connectEnvelope(msg: object, flags = 0): Buffer {
  const json = Buffer.from(JSON.stringify(msg));
  const prefix = Buffer.alloc(5);
  prefix.writeUInt8(flags, 0);
  prefix.writeUInt32BE(json.length, 1);
  return Buffer.concat([prefix, json]);
}

/** The messages of a Connect stream body, each as [flags, parsed JSON]; throws on a cut envelope. */
export function connectMessages(body: Buffer): [number, unknown][] {
  const out: [number, unknown][] = [];
  for (let at = 0; at < body.length;) {
    const len = body.readUInt32BE(at + 1);
    if (at + 5 + len > body.length) throw new Error(`envelope at ${at} is cut off`);
    out.push([body[at]!, JSON.parse(body.subarray(at + 5, at + 5 + len).toString())]);
    at += 5 + len;
  }
  return out;
}

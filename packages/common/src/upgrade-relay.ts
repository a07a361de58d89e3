import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * An upstream's answer head as HTTP/1.1 text for a client's raw socket: its status line, the
 * `first` lines, then its headers as spelled (those `keep` accepts), and the blank line.
 */
export function rawAnswerHead(
  answer: IncomingMessage,
  opts: { first?: readonly string[]; keep?: (lowerName: string) => boolean } = {},
): string {
  const lines = [`HTTP/1.1 ${answer.statusCode} ${answer.statusMessage}`, ...(opts.first ?? [])];
  for (let i = 0; i < answer.rawHeaders.length; i += 2) {
    const name = answer.rawHeaders[i]!;
    if (!opts.keep || opts.keep(name.toLowerCase())) lines.push(`${name}: ${answer.rawHeaders[i + 1]}`);
  }
  return lines.join('\r\n') + '\r\n\r\n';
}

/**
 * Splices a client's upgraded connection (a WebSocket, or any HTTP/1.1 upgrade) to the upstream
 * that accepted it: the upstream's 101 goes to the client, the bytes either side read ahead go
 * on, and from then on each side's bytes flow to the other. Either side closing or failing
 * closes both, so neither is left open to a peer that is gone.
 */
export function spliceUpgrade(
  client: Duplex,
  clientHead: Buffer,
  answer: IncomingMessage,
  upstream: Duplex,
  upstreamHead: Buffer,
): void {
  client.write(rawAnswerHead(answer));
  if (upstreamHead.length) client.write(upstreamHead);
  if (clientHead.length) upstream.write(clientHead);
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
  client.on('close', () => upstream.destroy());
  upstream.on('close', () => client.destroy());
  upstream.pipe(client).pipe(upstream);
}

/** What a client may send before its upgrade is answered (a WebSocket client sends nothing). */
const EARLY_LIMIT = 64 * 1024;

export interface HeldUpgrade {
  /** Stops holding; the bytes the client sent meanwhile, to go on to the upstream. */
  take(): Buffer;
}

/**
 * Reads a client's socket while its upgrade waits for the upstream's answer: a socket nobody
 * reads never sees its peer leave, so the upstream request (and anything kept alive for it) would
 * stay open for a client that is gone. `onGone` runs when the client closes or half-closes
 * first; more than a few KiB sent early closes it.
 */
export function holdUntilUpgraded(client: Duplex, onGone: () => void): HeldUpgrade {
  const early: Buffer[] = [];
  let bytes = 0;
  const onData = (d: Buffer) => {
    bytes += d.length;
    if (bytes > EARLY_LIMIT) client.destroy();
    else early.push(d);
  };
  const gone = () => {
    client.destroy();
    onGone();
  };
  client.on('data', onData);
  client.once('end', gone);
  client.once('close', gone);
  return {
    take() {
      client.pause();
      client.off('data', onData);
      client.off('end', gone);
      client.off('close', gone);
      return Buffer.concat(early);
    },
  };
}

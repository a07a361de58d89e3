/** One server-sent event, as written on the wire (the data is one JSON line). */
export function formatEvent(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export interface ParsedEvent {
  event: string;
  data: string;
}

/**
 * Incremental parser of an event stream (the WHATWG rules the app needs: `event:`, multi-line
 * `data:`, comments, CRLF or LF). Feed it text as it arrives; it returns the complete events.
 */
export class EventStreamParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];

  push(chunk: string): ParsedEvent[] {
    this.buffer += chunk;
    const out: ParsedEvent[] = [];
    for (;;) {
      const nl = this.buffer.search(/\r\n|\n|\r/);
      // A lone CR at the end may be the first half of a CRLF still on its way.
      if (nl < 0 || (nl === this.buffer.length - 1 && this.buffer[nl] === '\r')) break;
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + (this.buffer.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') {
        if (this.data.length) out.push({ event: this.event || 'message', data: this.data.join('\n') });
        this.event = '';
        this.data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') this.event = value;
      else if (field === 'data') this.data.push(value);
    }
    return out;
  }
}

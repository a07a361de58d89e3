import { describe, expect, it } from 'vitest';
import { answered } from '../security/fuzz-requests.js';

describe("the fuzzer's raw client knows an answer is whole", () => {
  const head = (lines: string[]) => `HTTP/1.1 ${lines.join('\r\n')}\r\n\r\n`;

  it('once the body its content-length announces is in', () => {
    const h = head(['400 Bad Request', 'Content-Length: 5']);
    expect(answered(h + 'hell', 'GET')).toBe(false);
    expect(answered(h + 'hello', 'GET')).toBe(true);
  });

  it('once a chunked body ends', () => {
    const h = head(['404 Not Found', 'Transfer-Encoding: chunked']);
    expect(answered(`${h}5\r\nhello\r\n`, 'GET')).toBe(false);
    expect(answered(`${h}5\r\nhello\r\n0\r\n\r\n`, 'GET')).toBe(true);
  });

  it('at the head for answers without a body, and never before the head ends', () => {
    expect(answered(head(['200 OK', 'Content-Length: 10']), 'HEAD')).toBe(true);
    expect(answered(head(['204 No Content']), 'DELETE')).toBe(true);
    expect(answered(head(['101 Switching Protocols', 'Upgrade: websocket']), 'GET')).toBe(true);
    expect(answered('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n', 'GET')).toBe(false);
  });

  it('only at the close for a body delimited by the connection', () => {
    expect(answered(head(['200 OK', 'Connection: close']) + 'all of it', 'GET')).toBe(false);
  });
});

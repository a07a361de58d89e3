# A web server for the TLS test's sandbox (Python's standard library only, as in base): a file,
# a server-sent event stream, and a WebSocket that echoes one text message.
import base64, hashlib, http.server, sys

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket()
        if self.path == "/sse":
            return self.events()
        body = b"served over tls\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Seen-Host", self.headers.get("Host", ""))
        self.end_headers()
        self.wfile.write(body)

    def events(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for n in range(3):
            self.wfile.write(b"data: tick %d\n\n" % n)
            self.wfile.flush()
        self.close_connection = True

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"].encode()
        accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        head = self.rfile.read(2)
        length = head[1] & 0x7F
        mask = self.rfile.read(4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
        reply = b"echo: " + data
        self.wfile.write(bytes([0x81, len(reply)]) + reply)
        self.wfile.flush()
        self.close_connection = True


http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()

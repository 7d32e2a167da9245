#!/usr/bin/env python3
"""The quickstart's demo backend: answers every request with JSON describing it."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(
            {
                "backend": "demo-backend",
                "method": self.command,
                "path": self.path,
                "host": self.headers.get("Host"),
            }
        ).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 13001
    ThreadingHTTPServer(("127.0.0.1", port), Echo).serve_forever()

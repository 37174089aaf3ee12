"""An HTTP proxy in front of a real S3 server that makes some of its answers
fail, as a loaded or flaky store does: the first --fail GETs get --status
with S3's SlowDown error body, the next --truncate GETs get the whole
response's headers but half its body, then the connection is cut; the first
--fail-parts PUTs of a multipart upload's parts get --status too. Everything
else passes through unchanged (the Host header too: the client signed it).
--log appends "METHOD PATH STATUS" for every request it passed on.
Standard library only; any python3.

  python3 s3_fault_proxy.py --upstream http://127.0.0.1:8000 --port-file F [--fail N] [--status 503]
                            [--truncate N] [--ranged-only] [--fail-parts N] [--log FILE]
--ranged-only counts only the GETs of object parts (with a Range header).
"""
import argparse
import http.client
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--upstream", required=True)
parser.add_argument("--port-file", required=True)
parser.add_argument("--fail", type=int, default=0)
parser.add_argument("--status", type=int, default=503)
parser.add_argument("--truncate", type=int, default=0)
parser.add_argument("--ranged-only", action="store_true", help="count only GETs with a Range header (object parts)")
parser.add_argument("--fail-parts", type=int, default=0)
parser.add_argument("--log", default="")
args = parser.parse_args()
upstream = urllib.parse.urlparse(args.upstream)
lock = threading.Lock()
gets = [0]
parts = [0]

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        n = -1
        if self.command == "GET" and (not args.ranged_only or "Range" in self.headers):
            with lock:
                n = gets[0]
                gets[0] += 1
        failed_part = False
        if self.command == "PUT" and "partNumber=" in self.path:
            with lock:
                failed_part = parts[0] < args.fail_parts
                parts[0] += 1
        if 0 <= n < args.fail or failed_part:
            self.send_response(args.status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOW_DOWN)))
            self.end_headers()
            self.wfile.write(SLOW_DOWN)
            return
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
        conn.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if args.log:
            with lock, open(args.log, "a") as log:
                log.write(f"{self.command} {self.path} {resp.status}\n")
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection"):
                self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in resp.getheaders()):
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if args.fail <= n < args.fail + args.truncate and len(data) > 1:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = forward


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402

os.rename(args.port_file + ".tmp", args.port_file)
server.serve_forever()

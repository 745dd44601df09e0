"""Local HTTP(S) stand-ins on 127.0.0.1: a Redfish service and a Prometheus query API."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1, made with the openssl CLI (EC key: fast)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


class JsonServer:
    """Serve ``routes`` (path -> JSON-able, or callable(query) -> JSON-able); optional basic auth and TLS."""

    def __init__(self, routes: dict, auth: tuple[str, str] | None = None, tls: tuple[Path, Path] | None = None):
        self.routes = routes
        self.auth = auth
        self.hits: list[str] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_GET(self):
                outer.hits.append(self.path)
                if outer.auth is not None:
                    want = "Basic " + base64.b64encode(f"{outer.auth[0]}:{outer.auth[1]}".encode()).decode()
                    if self.headers.get("Authorization") != want:
                        self.send_response(401)
                        self.end_headers()
                        return
                path, _, q = self.path.partition("?")
                route = outer.routes.get(path)
                if route is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                body = route(urllib.parse.parse_qs(q)) if callable(route) else route
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()

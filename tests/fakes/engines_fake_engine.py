"""A fake engine for launcher tests: a stdlib HTTP server started as a child process.

``python engines_fake_engine.py PORT MODE`` where MODE is ``ok`` (answers /health and /v1/models
after a short start), ``crash`` (prints a traceback-like tail and exits 3), ``hang`` (never
answers), ``child`` (like ok, and spawns a grandchild sleeper in the same process group whose pid
it prints as ``CHILD_PID=…``), ``lose_port MARKER`` (exits with "address already in use" unless the
MARKER file exists, which it creates), ``loud`` (like ok, after printing its command line, its
``HF_TOKEN`` and a terminal escape: what an engine that logs its arguments and environment writes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def main() -> None:
    port, mode = int(sys.argv[1]), sys.argv[2]
    print(f"fake engine starting on {port} mode={mode}", flush=True)
    if mode == "crash":
        for i in range(40):
            print(f"loading layer {i}", flush=True)
        print("RuntimeError: no such model directory: /nope", flush=True)
        sys.exit(3)
    if mode == "lose_port":  # the first start loses its port to someone else, later ones work
        import pathlib

        marker = pathlib.Path(sys.argv[3])
        if not marker.exists():
            marker.write_text("1")
            print("OSError: [Errno 98] error while attempting to bind: address already in use", flush=True)
            sys.exit(1)
    if mode == "loud":
        import os

        print("non-default args:", sys.argv[3:], flush=True)
        os.write(2, f"token from the environment: {os.environ.get('HF_TOKEN')}\x1b]0;pwned\x07\n".encode())
    if mode == "hang":
        time.sleep(3600)
    if mode == "child":
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        print(f"CHILD_PID={p.pid}", flush=True)
    time.sleep(0.3)

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path in ("/health", "/v1/models"):
                body = json.dumps({"object": "list", "data": [{"id": "fake-model", "max_model_len": 128}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.end_headers()

        def log_message(self, fmt, *args):
            print("request", self.path, flush=True)

    HTTPServer(("127.0.0.1", port), H).serve_forever()


if __name__ == "__main__":
    main()

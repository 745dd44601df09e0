"""A hostile ``/metrics``: a vLLM-shaped exposition whose ``model_name`` label churns.

Every scrape lists one steady model (``tiny``, ``tokens_per_scrape`` more output tokens each time)
and ``churn`` models never seen before (``m<scrape>-<i>``, one output token each): the label churn
a server bug or a hostile server can produce. ``label_bytes`` > 0 adds one model whose name is that
many bytes long. Ground truth: the steady model's count and the total are known per scrape
(``scrapes`` counts the answers). Serves on 127.0.0.1 only; ``ChurnServer(...).start()`` in a
thread, ``stop()`` to end it; ``python -m tests.fakes.churn_metrics --port P --churn N`` as a process.
"""

from __future__ import annotations

import argparse
import http.server
import threading


class ChurnServer:
    def __init__(self, churn: int = 2000, *, tokens_per_scrape: float = 100.0, label_bytes: int = 0,
                 port: int = 0) -> None:
        self.churn = churn
        self.tokens_per_scrape = tokens_per_scrape
        self.label_bytes = label_bytes
        self.scrapes = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if self.path.split("?")[0] != "/metrics":
                    self.send_response(404)
                    self.end_headers()
                    return
                body = outer.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None

    def exposition(self) -> str:
        with self._lock:
            self.scrapes += 1
            k = self.scrapes
        steady = k * self.tokens_per_scrape
        lines = ["# TYPE vllm:generation_tokens_total counter",
                 f'vllm:generation_tokens_total{{model_name="tiny"}} {steady}']
        lines += [f'vllm:generation_tokens_total{{model_name="m{k}-{i}"}} 1' for i in range(self.churn)]
        if self.label_bytes:
            lines.append(f'vllm:generation_tokens_total{{model_name="{"L" * self.label_bytes}"}} {k}')
        lines += ["# TYPE vllm:prompt_tokens_total counter", f'vllm:prompt_tokens_total{{model_name="tiny"}} {steady}',
                  "# TYPE vllm:num_requests_running gauge", 'vllm:num_requests_running{model_name="tiny"} 1',
                  "# TYPE vllm:num_requests_waiting gauge", 'vllm:num_requests_waiting{model_name="tiny"} 0']
        return "\n".join(lines) + "\n"

    def start(self) -> "ChurnServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--churn", type=int, default=2000)
    p.add_argument("--label-bytes", type=int, default=0)
    a = p.parse_args(argv)
    srv = ChurnServer(a.churn, label_bytes=a.label_bytes, port=a.port)
    print(srv.port, flush=True)
    srv.httpd.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A local fake of an OpenAI-compatible ``POST /v1/embeddings`` server, over real HTTP.

Each text's vector is a bag of its words hashed into `DIM` buckets (deterministic: two texts
sharing words are close). `fail_next` makes the next requests answer 503 (a retry is expected);
`requests` records each request's inputs (the batching is checked)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIM = 16


def bag_vector(text: str) -> list[float]:
    v = [0.0] * DIM
    for w in re.findall(r"[a-z]+", text.lower()):
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % DIM] += 1.0
    return v if any(v) else [1.0] + [0.0] * (DIM - 1)


class FakeEmbeddings(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[list[str]] = []
        self.fail_next = 0
        self.status_on_fail = 503

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeEmbeddings

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/embeddings":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        if self.server.fail_next > 0:
            self.server.fail_next -= 1
            return self._send(self.server.status_on_fail, {"error": {"message": "try again"}})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.server.requests.append(texts)
        data = [{"object": "embedding", "index": i, "embedding": bag_vector(t)} for i, t in enumerate(texts)]
        self._send(200, {"object": "list", "data": list(reversed(data)), "model": body.get("model")})
        return None

    def _send(self, status: int, payload: dict) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@contextmanager
def fake_embeddings() -> Iterator[FakeEmbeddings]:
    server = FakeEmbeddings()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()

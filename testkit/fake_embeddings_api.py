"""A local fake of an OpenAI-compatible ``POST /v1/embeddings`` server, over real HTTP.

Each text's vector is a bag of its words hashed into `DIM` buckets (deterministic: two texts
sharing words are close). `fail_next` makes the next requests answer 503 (a retry is expected);
`requests` records each request's inputs (the batching is checked). `answer` makes a 200 carry
what a broken server sends: ``"nan"`` or ``"inf"`` (one bad number per vector, JSON's
non-standard literals as Python's json writes them), ``"zero"`` (all zeros), ``"short"``
(vectors one number short), ``"ragged"`` (the first vector one longer than the rest),
``"fewer"`` (one vector fewer than texts), ``"ok"`` (the default)."""

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


def _broken(answer: str, i: int, v: list[float]) -> list[float]:
    if answer in ("nan", "inf"):
        return [float(answer)] + v[1:]
    if answer == "zero":
        return [0.0] * len(v)
    if answer == "short":
        return v[:-1]
    if answer == "ragged" and i == 0:
        return [*v, 1.0]
    return v


class FakeEmbeddings(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[list[str]] = []
        self.fail_next = 0
        self.status_on_fail = 503
        self.answer = "ok"

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
        data = [
            {"object": "embedding", "index": i, "embedding": _broken(self.server.answer, i, bag_vector(t))}
            for i, t in enumerate(texts)
        ]
        if self.server.answer == "fewer":
            data = data[:-1]
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

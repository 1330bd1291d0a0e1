"""What the scripted fakes of a provider's HTTP API share (testkit/fake_messages_api.py,
testkit/fake_chat_completions.py): the requests they recorded, the script's bookkeeping and the
server's life on a thread of its own."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: Any  # parsed JSON, or the raw text if it was not JSON


class ScriptedServer:
    """A fake's HTTP server, started with `start()` or `with`: `requests` in arrival order,
    `remaining` script actions; the subclass answers in its handler."""

    thread_name: ClassVar[str]

    def _serve(
        self, script: list[Any], host: str, port: int, handler: Callable[..., BaseHTTPRequestHandler]
    ) -> None:
        self._script = list(script)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a delayed handler must not hold up close()
        self._thread: threading.Thread | None = None

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def start(self) -> Self:
        # A short poll keeps close() (which waits for the loop to notice) quick in tests.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- called from handler threads --

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(req)

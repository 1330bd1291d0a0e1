"""Batch mode (ANIMA_LLM_MODE=batch): the tool-use turns of every anima of a night go out
together through the Message Batches API, at half the price, for nights where latency does
not matter.

The animas of a night run in threads (sleep/pool.py); each one's engine call submits its
request here and blocks. The collector sends one batch when every anima thread of the night
is waiting (members register with `member()`), or when no new request arrived for
`window_s` (a thread busy on the database, or a caller that never registered), then polls
the batch every `poll_s` until it ended, and hands each thread its own result. The next
tool turn of every anima is the next batch. Prompt caching applies inside a batch as it does
outside, and the same stop-reason handling runs on each result (the engine's loop is the
same; only the transport differs).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anthropic

from anima_pipeline.llm.errors import EngineError, RequestRejected, RetriesExhausted

if TYPE_CHECKING:
    from anima_pipeline.llm.anthropic_engine import AnthropicEngine

log = logging.getLogger(__name__)


@dataclass
class _Slot:
    step: str
    params: dict[str, Any]
    engine: AnthropicEngine
    done: threading.Event = field(default_factory=threading.Event)
    message: Any = None
    error: EngineError | None = None


class BatchCollector:
    """Shared by the threads of one night (one engine, one collector)."""

    def __init__(self, *, window_s: float = 2.0, poll_s: float = 30.0, max_requests: int = 10_000) -> None:
        self.window_s, self.poll_s, self.max_requests = window_s, poll_s, max_requests
        # threads of a pool start a moment apart: a batch waits this long after the last
        # join or request even when every member already waits
        self.grace_s = min(window_s, 0.25)
        self._cond = threading.Condition()
        self._pending: list[_Slot] = []
        self._members = 0
        self._last_arrival = 0.0
        self._last_change = 0.0  # a member joined or a request arrived
        self._sender: threading.Thread | None = None
        self._ids = itertools.count(1)
        self.batches_sent = 0
        self.requests_sent = 0

    # -- the threads of the night --

    @contextlib.contextmanager
    def member(self) -> Iterator[None]:
        """Counts a thread as one of the night's animas while it runs, so a batch goes out as
        soon as every member is waiting instead of after the window."""
        with self._cond:
            self._members += 1
            self._last_change = time.monotonic()
        try:
            yield
        finally:
            with self._cond:
                self._members -= 1
                self._cond.notify_all()

    def submit(self, engine: AnthropicEngine, step: str, params: dict[str, Any]) -> Any:
        """Queue one Messages request and block until its batch has ended; the result's
        message, or the error its batch entry reported (as the engine's errors)."""
        slot = _Slot(step=step, params=_copy(params), engine=engine)
        with self._cond:
            self._pending.append(slot)
            self._last_arrival = self._last_change = time.monotonic()
            if self._sender is None or not self._sender.is_alive():
                self._sender = threading.Thread(target=self._send_loop, name="llm-batch", daemon=True)
                self._sender.start()
            self._cond.notify_all()
        slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.message

    # -- the sender --

    def _ready(self) -> bool:
        if not self._pending:
            return False
        if len(self._pending) >= self.max_requests:
            return True
        now = time.monotonic()
        if self._members and len(self._pending) >= self._members and now - self._last_change >= self.grace_s:
            return True  # every anima thread of the night is waiting (and no one just joined)
        return now - self._last_arrival >= self.window_s

    def _send_loop(self) -> None:
        while True:
            with self._cond:
                while not self._ready():
                    if not self._pending:
                        self._sender = None  # idle: the next submit starts a new sender
                        return
                    left = self.window_s - (time.monotonic() - self._last_arrival)
                    self._cond.wait(timeout=max(min(left, self.grace_s), 0.01))
                batch, self._pending = self._pending[: self.max_requests], self._pending[self.max_requests :]
            self._run(batch)

    def _run(self, batch: list[_Slot]) -> None:
        engine = batch[0].engine
        ids = {f"r{next(self._ids)}": slot for slot in batch}
        try:
            client = engine.client
            created = client.messages.batches.create(
                requests=[{"custom_id": cid, "params": slot.params} for cid, slot in ids.items()]
            )
            self.batches_sent += 1
            self.requests_sent += len(batch)
            log.info("batch %s: %d request(s) sent", created.id, len(batch))
            status = created
            while status.processing_status != "ended":
                time.sleep(self.poll_s)
                status = client.messages.batches.retrieve(created.id)
            seen = set()
            for entry in client.messages.batches.results(created.id):
                slot = ids.get(entry.custom_id)
                if slot is None:
                    continue
                seen.add(entry.custom_id)
                _settle(slot, entry.result)
            for cid in set(ids) - seen:
                ids[cid].error = RetriesExhausted(
                    f"step {ids[cid].step!r}: batch {created.id} ended without a result for this request",
                    step=ids[cid].step,
                )
        except anthropic.AnthropicError as err:
            for slot in batch:
                if slot.message is None and slot.error is None:
                    slot.error = engine.translate(slot.step, err)
        except Exception as err:  # the sender thread must hand every waiting step an answer
            log.exception("batch of %d request(s) failed", len(batch))
            for slot in batch:
                if slot.message is None and slot.error is None:
                    slot.error = EngineError(
                        f"step {slot.step!r}: the batch failed: {type(err).__name__}: {err}", step=slot.step
                    )
        finally:
            for slot in batch:
                slot.done.set()


def _settle(slot: _Slot, result: Any) -> None:
    kind = result.type
    if kind == "succeeded":
        slot.message = result.message
        return
    if kind == "errored":
        inner = getattr(result.error, "error", None)
        etype = getattr(inner, "type", "api_error")
        msg = f"step {slot.step!r}: batched request failed: {etype}: {getattr(inner, 'message', '')}"
        if etype in ("invalid_request_error", "authentication_error", "permission_error", "not_found_error"):
            slot.error = RequestRejected(msg, step=slot.step, status=400)
        else:
            slot.error = RetriesExhausted(msg, step=slot.step)
        return
    slot.error = RetriesExhausted(f"step {slot.step!r}: batched request {kind}", step=slot.step)


def _copy(params: dict[str, Any]) -> dict[str, Any]:
    """The request as it is now: the engine keeps appending to its own message list."""
    out = dict(params)
    out["messages"] = [dict(m) for m in params["messages"]]
    return out

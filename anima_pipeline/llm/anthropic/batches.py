"""Batch mode (ANIMA_LLM_MODE=batch): the tool-use turns of every anima of a night go out
together through the Message Batches API, at half the price, for nights where latency does
not matter.

The animas of a night run in threads (night/pool.py); each one's engine call submits its
request here and blocks. The collector sends one batch when every anima thread of the night
is waiting (members register with `member()`), or when no new request arrived for
`window_s` (a thread busy on the database, or a caller that never registered), then polls
the batch every `poll_s` until it ended, and hands each thread its own result. The next
tool turn of every anima is the next batch. Prompt caching applies inside a batch as it does
outside, and the same stop-reason handling runs on each result (the engine's loop is the
same; only the transport differs).

An entry that failed for a reason worth trying again (the API's errored server-side or
overloaded result, an entry expired or canceled, or no result at all) is sent again in the
next batch, with the other animas' next turns, up to `max_attempts` sends in all; only then
does its step fail. A request the API rejects (invalid, unauthorized) fails at once: sending
it again would get the same answer. Errored entries are not billed, so a resend costs nothing
twice.
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

from anima_pipeline.llm.anthropic.sdk import sdk
from anima_pipeline.llm.failures import EngineError, RequestRejected, RetriesExhausted

if TYPE_CHECKING:
    from anima_pipeline.llm.anthropic.engine import AnthropicEngine

log = logging.getLogger(__name__)


@dataclass
class _Slot:
    step: str
    params: dict[str, Any]
    engine: AnthropicEngine
    done: threading.Event = field(default_factory=threading.Event)
    message: Any = None
    error: EngineError | None = None
    sends: int = 0  # how many batches this request has gone out in


# error types of a batch entry that the same request would get again
REJECTED = frozenset({"invalid_request_error", "authentication_error", "permission_error", "not_found_error"})


class BatchCollector:
    """Shared by the threads of one night (one engine, one collector)."""

    def __init__(
        self,
        *,
        window_s: float = 2.0,
        poll_s: float = 30.0,
        max_requests: int = 10_000,
        max_attempts: int = 3,
    ) -> None:
        self.window_s, self.poll_s, self.max_requests = window_s, poll_s, max_requests
        self.max_attempts = max_attempts
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
        self.requests_resent = 0

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
        resent: set[int] = set()
        try:
            client = engine.client
            # slot.params is the Messages request as built and validated by the engine
            sent: list[Any] = [{"custom_id": cid, "params": slot.params} for cid, slot in ids.items()]
            created = client.messages.batches.create(requests=sent)
            self.batches_sent += 1
            self.requests_sent += len(batch)
            for slot in batch:
                slot.sends += 1
            log.info("batch %s: %d request(s) sent", created.id, len(batch))
            status = created
            while status.processing_status != "ended":
                time.sleep(self.poll_s)
                status = client.messages.batches.retrieve(created.id)
            again: list[tuple[_Slot, str]] = []
            seen = set()
            for entry in client.messages.batches.results(created.id):
                found = ids.get(entry.custom_id)
                if found is None:
                    continue
                slot = found
                seen.add(entry.custom_id)
                why = _settle(slot, entry.result)
                if why:
                    again.append((slot, why))
            again += [
                (ids[cid], f"batch {created.id} ended without a result for it") for cid in set(ids) - seen
            ]
            resent = {id(slot) for slot in self._send_again(again)}
        except sdk().AnthropicError as err:
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
                if id(slot) not in resent:
                    slot.done.set()

    def _send_again(self, failed: list[tuple[_Slot, str]]) -> list[_Slot]:
        """Queue the entries that may succeed when sent again for the next batch (their threads
        keep waiting); those that have used their attempts get the step's error. Returns the
        queued ones."""
        queued = []
        for slot, why in failed:
            if slot.sends < self.max_attempts:
                queued.append(slot)
                log.warning(
                    "step %r: batched request sent again (%d of %d): %s",
                    slot.step,
                    slot.sends + 1,
                    self.max_attempts,
                    why,
                )
            else:
                slot.error = RetriesExhausted(
                    f"step {slot.step!r}: batched request failed in {slot.sends} batch(es); last: {why}",
                    step=slot.step,
                )
        if queued:
            with self._cond:
                self._pending.extend(queued)
                self.requests_resent += len(queued)
                self._last_arrival = self._last_change = time.monotonic()
                self._cond.notify_all()
        return queued


def _settle(slot: _Slot, result: Any) -> str | None:
    """Hand the slot its message or its final error; or say why the request is worth
    sending again (the slot stays open)."""
    kind = result.type
    if kind == "succeeded":
        slot.message = result.message
        return None
    if kind == "errored":
        inner = getattr(result.error, "error", None)
        etype = getattr(inner, "type", "api_error")
        why = f"{etype}: {getattr(inner, 'message', '')}"
        if etype not in REJECTED:
            return why
        slot.error = RequestRejected(
            f"step {slot.step!r}: batched request failed: {why}", step=slot.step, status=400
        )
        return None
    return f"the entry {kind}"  # expired or canceled


def _copy(params: dict[str, Any]) -> dict[str, Any]:
    """The request as it is now: the engine keeps appending to its own message list."""
    out = dict(params)
    out["messages"] = [dict(m) for m in params["messages"]]
    return out

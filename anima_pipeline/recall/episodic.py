"""Episodic recall: search over past messages (Letta's "recall memory"), ranked like memories
by `recall.ranking`, shown with their date, speaker and conversation title. Cron and debug
conversations are not the anima's life and are never recalled."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from anima_pipeline.core.errors import InputError, NotFound
from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.recall.ranking import Search, run
from anima_pipeline.recall.render import marked_part, message_item
from anima_pipeline.recall.sections import ContextItem, MessagePart
from anima_pipeline.store.db import Connection
from anima_pipeline.store.erasure import erased
from anima_pipeline.store.session_rows import message_part

PERIOD_BONUS = 0.3  # a message of the period the question names
DENSE_WEIGHT = 0.0  # as for memories: the nearest come after the lexical list and get the reserve
# A context reads a longer message in part: this many characters around the first word asked
# about (a reply: its head), marked cut: far more than a context line holds
# (ANIMA_RECALL_ITEM_MAX_CHARS, 400), far less than a pasted document (up to 256,000).
READ_CHARS = 4000


class MessageSearch(Search):
    table = "message"  # dated rows: the periods a question names are read too (store/recall_queries.py)
    dense_weight = DENSE_WEIGHT

    def __init__(
        self,
        anima_id: str,
        plan: QueryPlan,
        *,
        replies: bool = False,
        read_chars: int | None = None,
        **kw: Any,
    ) -> None:
        """`replies`: a page row asking something brings the next turn of its conversation
        (a context's list; active search pages what matched only). `read_chars`: a longer
        message is read in part, that many characters around the first word asked about
        (READ_CHARS: a context's list and active search; `read_message` reads one whole)."""
        super().__init__(anima_id, plan, **kw)
        self.replies = replies
        # the part read is the one `render.cut` takes a line from: its window's heads
        heads = sorted({re.escape(w[:5].lower()) for w in plan.terms if w})
        self.read = {"read_chars": read_chars, "heads": "|".join(heads) or None}
        self.params.update(self.read)  # the nearest rows' statement reads them there

    def filter_params(  # type: ignore[override]
        self,
        *,
        exclude_sessions: Sequence[str] = (),
        conversation_id: str | None = None,
        speaker: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, Any]:
        return {
            "exclude_sessions": list(exclude_sessions),
            "conversation": conversation_id,
            "speaker": speaker,
            "since": since,
            "until": until,
        }

    def score_args(self) -> dict[str, Any]:
        return {
            **super().score_args(),
            "period_bonus": PERIOD_BONUS,
            "replies": self.replies,
            "reply_chars": READ_CHARS,
            **self.read,
            "anima": self.params["anima"],
        }

    def items(self, rows: list[dict[str, Any]]) -> list[ContextItem]:
        return [
            self._read(
                r,
                r.get("read_from"),
                r.get("chars", 0),
                score=float(r["score"]),
                why="matched " + ", ".join(r["matched"]) + (" (in the period)" if r["in_period"] else ""),
            )
            for r in rows
        ]

    def _read(self, row: dict[str, Any], start: int | None, total: int, **kw: Any) -> ContextItem:
        """A message row as read: whole (`start` None), or its part from `start` of a text of
        `total` characters, marked where it was cut and `truncated`."""
        if start is None:
            return message_item(row, tz=self.tz, **kw)
        item = message_item({**row, "content": marked_part(row["content"], start, total)}, tz=self.tz, **kw)
        item.truncated = True
        return item

    def with_replies(self, items: list[ContextItem], rows: list[dict[str, Any]]) -> list[ContextItem]:
        """Each asking message followed by the turn that answers it (once: where it ranks first)."""
        out: list[ContextItem] = []
        seen: set[str] = set()
        for item, r in zip(items, rows, strict=True):
            if item.ref in seen:
                continue
            out.append(item)
            seen.add(item.ref)
            if r.get("r_id") is None or f"m-{r['r_id']}" in seen:
                continue
            reply = {
                "id": r["r_id"],
                "conversation_id": r["conversation_id"],
                "role": r["r_role"],
                "speaker": r["r_speaker"],
                "content": r["r_content"][:READ_CHARS],
                "created_at": r["r_created_at"],
                "title": r["title"],
            }
            total = len(r["r_content"])  # its head is read: READ_CHARS and one more tells a longer one
            head = 0 if total > READ_CHARS else None
            out.append(
                self._read(reply, head, total, score=float(r["score"]), why=f"the reply to {item.ref}")
            )
            seen.add(out[-1].ref)
        return out


def rank_messages(conn: Connection, anima_id: str, plan: QueryPlan, **kw: Any) -> list[ContextItem]:
    """Messages matching the plan, best first (a term may also match the speaker's name)."""
    (items,), _ = run(conn, anima_id, [MessageSearch(anima_id, plan, **kw)])
    return items


def read_message(conn: Connection, anima_id: str, message_id: int, offset: int, limit: int) -> MessagePart:
    """The anima's message `message_id`, `limit` characters of it from `offset`: what a
    context or a search page shows in part (`truncated`), read whole in as many calls as it
    takes. NotFound (field `id`) for another anima's, unknown, erased or forgotten ids;
    InputError (field `offset`) for an offset at or past its end."""
    ref = f"m-{message_id}"
    row = message_part(conn, anima_id, message_id, offset, limit)
    if row is None:
        raise NotFound("message", ref, erased(conn, anima_id, "message", message_id), field="id")
    if row["forgotten_at"] is not None:
        raise NotFound("message", ref, field="id", forgotten_at=row["forgotten_at"])
    total = row["total_chars"]
    if offset >= total > 0:
        raise InputError(
            f"is {offset:,}, past the end of message {ref} ({total:,} characters)", field="offset"
        )
    end = offset + len(row["content"])
    return MessagePart(
        id=ref,
        conversation_id=row["conversation_id"],
        title=row["title"],
        role=row["role"],
        speaker=row["speaker"],
        created_at=row["created_at"],
        content=row["content"],
        offset=offset,
        total_chars=total,
        has_more=end < total,
        next_offset=end if end < total else None,
    )

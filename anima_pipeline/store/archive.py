"""The conversation archive: validating and importing the JSONL form, and reading days back.

Import is one transaction over all files: a bad line anywhere aborts everything and names
file, line and field, so the store is never half-imported. Re-importing is a no-op because
(anima, conversation, message_id) is unique and inserts skip conflicts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit

NonEmpty = Field(min_length=1)


class ArchiveRecord(BaseModel):
    """One line of the archive format (shared/data/README.md)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)

    anima_id: str = NonEmpty
    conversation_id: str = NonEmpty
    message_id: str = NonEmpty
    role: Literal["user", "assistant", "tool", "system"]
    speaker: str | None = None
    content: str = NonEmpty
    created_at: datetime
    platform: str | None = None
    title: str | None = None
    debug: bool | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("anima_id", "conversation_id", "message_id", "content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v

    @field_validator("anima_id", "conversation_id", "message_id", "speaker", "content", "platform", "title")
    @classmethod
    def _storable(cls, v: str | None) -> str | None:
        # JSON allows \u0000, PostgreSQL text does not: name the field here, not in a DataError.
        if v is not None and "\x00" in v:
            raise ValueError("contains a NUL character (\\u0000), which PostgreSQL cannot store")
        return v

    @field_validator("metadata")
    @classmethod
    def _storable_metadata(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None and _has_nul(v):
            raise ValueError("contains a NUL character (\\u0000), which PostgreSQL cannot store")
        return v

    @field_validator("created_at", mode="before")
    @classmethod
    def _offset_required(cls, v: Any) -> Any:
        if isinstance(v, datetime):
            parsed = v
        elif isinstance(v, str):
            try:
                parsed = datetime.fromisoformat(v)
            except ValueError as exc:
                raise ValueError(f"not an ISO-8601 timestamp: {v!r}") from exc
        else:  # a number would be a guess between epoch seconds and milliseconds
            raise ValueError("must be an ISO-8601 string with a UTC offset, e.g. 2023-05-08T13:56:00+08:00")
        if parsed.tzinfo is None:
            raise ValueError(f"timestamp {v!r} has no UTC offset (write e.g. {v}+08:00)")
        return parsed


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(x) for k, x in value.items())
    if isinstance(value, list):
        return any(_has_nul(x) for x in value)
    return False


class ArchiveError(ValueError):
    """A bad archive line; the message names the file and the line."""


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "line"
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "string_too_short":
            msg = "required field is empty"
        parts.append(f"field '{loc}': {msg}")
    return "; ".join(parts)


def parse_lines(lines: Iterable[str], source: str) -> Iterator[ArchiveRecord]:
    """Validate every line; raise ArchiveError naming `source:line` on the first bad one."""
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ArchiveError(f"{source}:{lineno}: broken JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise ArchiveError(f"{source}:{lineno}: a line must be a JSON object, got {type(obj).__name__}")
        try:
            yield ArchiveRecord.model_validate(obj)
        except ValidationError as exc:
            raise ArchiveError(f"{source}:{lineno}: {_describe(exc)}") from None


@dataclass
class ImportStats:
    files: int = 0
    lines: int = 0
    messages_added: int = 0
    conversations_added: int = 0
    skipped_cleaned: int = 0  # lines of conversations the night's cleanup deleted (tombstoned)
    animas: set[str] = field(default_factory=set)


def cleaned_conversations(conn: Connection) -> set[tuple[str, str]]:
    """(anima, conversation) pairs the cleanup deleted and nobody restored since: a re-import
    of the same archive must not bring them back (import stays idempotent across nights)."""
    state: dict[tuple[str, str], str] = {}
    for row in conn.execute(
        """SELECT anima_id, memory_id, op FROM memory_event
           WHERE table_name = 'conversation' AND op IN ('delete', 'restore') ORDER BY id"""
    ).fetchall():
        state[(row["anima_id"], row["memory_id"])] = row["op"]
    return {key for key, op in state.items() if op == "delete"}


def import_records(
    conn: Connection, records: Iterable[ArchiveRecord], audit: Audit, stats: ImportStats
) -> None:
    """Insert records inside the caller's transaction. Conversations take created_at /
    updated_at from their messages (min / max), and keep platform, title, debug when given.
    Conversations the cleanup deleted stay deleted (restore them from memory_event instead)."""
    tombstones = cleaned_conversations(conn)
    for rec in records:
        stats.lines += 1
        stats.animas.add(rec.anima_id)
        if (rec.anima_id, rec.conversation_id) in tombstones:
            stats.skipped_cleaned += 1
            continue
        row = conn.execute(
            """INSERT INTO conversation (id, anima_id, platform, title, debug, created_at, updated_at)
               VALUES (%s, %s, COALESCE(%s, 'chat'), %s, COALESCE(%s, false), %s, %s)
               ON CONFLICT (anima_id, id) DO UPDATE SET
                   created_at = LEAST(conversation.created_at, EXCLUDED.created_at),
                   updated_at = GREATEST(conversation.updated_at, EXCLUDED.updated_at),
                   platform = COALESCE(%s, conversation.platform),
                   title = COALESCE(%s, conversation.title),
                   debug = COALESCE(%s, conversation.debug)
               RETURNING (xmax = 0) AS inserted""",
            (
                rec.conversation_id,
                rec.anima_id,
                rec.platform,
                rec.title,
                rec.debug,
                rec.created_at,
                rec.created_at,
                rec.platform,
                rec.title,
                rec.debug,
            ),
        ).fetchone()
        if row and row["inserted"]:
            stats.conversations_added += 1
            audit.for_anima(rec.anima_id).record(
                "conversation",
                rec.conversation_id,
                "import",
                None,
                {"platform": rec.platform or "chat", "title": rec.title, "debug": bool(rec.debug)},
            )
        added = conn.execute(
            """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at, metadata)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb)
               ON CONFLICT (anima_id, conversation_id, external_id) DO NOTHING""",
            (
                rec.anima_id,
                rec.conversation_id,
                rec.message_id,
                rec.role,
                rec.speaker,
                rec.content,
                rec.created_at,
                json.dumps(rec.metadata or {}),
            ),
        ).rowcount
        stats.messages_added += added


@dataclass(frozen=True)
class DayMessage:
    id: int
    conversation_id: str
    external_id: str
    role: str
    speaker: str | None
    content: str
    created_at: datetime


@dataclass(frozen=True)
class DayConversation:
    id: str
    title: str | None
    platform: str
    messages: tuple[DayMessage, ...]

    @property
    def started_at(self) -> datetime:
        return self.messages[0].created_at

    @property
    def ended_at(self) -> datetime:
        return self.messages[-1].created_at


def animas_active_between(conn: Connection, start: datetime, end: datetime) -> list[str]:
    rows = conn.execute(
        """SELECT DISTINCT m.anima_id FROM message m
           JOIN conversation c ON c.anima_id = m.anima_id AND c.id = m.conversation_id
           WHERE m.created_at >= %s AND m.created_at < %s AND c.platform <> 'cron' AND NOT c.debug
           ORDER BY m.anima_id""",
        (start, end),
    ).fetchall()
    return [r["anima_id"] for r in rows]


def day_conversations(
    conn: Connection,
    anima_id: str,
    start: datetime,
    end: datetime,
    roles: tuple[str, ...] = ("user", "assistant"),
) -> list[DayConversation]:
    """The conversations with messages in [start, end), only those messages; cron and debug
    conversations excluded (scheduled jobs and test harnesses are not the anima's life),
    ordered by their first message. A conversation that crosses midnight gives each day its part."""
    rows = conn.execute(
        """SELECT m.id, m.conversation_id, m.external_id, m.role, m.speaker, m.content, m.created_at,
                  c.title, c.platform
           FROM message m JOIN conversation c ON c.anima_id = m.anima_id AND c.id = m.conversation_id
           WHERE m.anima_id = %s AND m.created_at >= %s AND m.created_at < %s
             AND c.platform <> 'cron' AND NOT c.debug AND m.role = ANY(%s)
           ORDER BY m.created_at, m.id""",
        (anima_id, start, end, list(roles)),
    ).fetchall()
    grouped: dict[str, list[dict]] = {}
    for r in rows:
        grouped.setdefault(r["conversation_id"], []).append(r)
    out = []
    for cid, msgs in grouped.items():
        out.append(
            DayConversation(
                id=cid,
                title=msgs[0]["title"],
                platform=msgs[0]["platform"],
                messages=tuple(
                    DayMessage(
                        m["id"], cid, m["external_id"], m["role"], m["speaker"], m["content"], m["created_at"]
                    )
                    for m in msgs
                ),
            )
        )
    return out

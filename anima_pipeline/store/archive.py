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
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError, NotFound
from anima_pipeline.core.types import Role
from anima_pipeline.core.validation import (
    AnimaId,
    ExternalId,
    Flag,
    JsonObject,
    MessageText,
    Name,
    Timestamp,
    Title,
    context_of,
)
from anima_pipeline.store.calendar import move_first_message
from anima_pipeline.store.db import Connection, one
from anima_pipeline.store.events import Audit
from anima_pipeline.store.status import cleaned_conversations


class MessageRecord(BaseModel):
    """One message as an agent hands it in: the archive line without its anima, which the
    caller (the API key, the facade) supplies. The archive format and the live API share
    these fields and their validation (anima_pipeline.core.validation: the rules of every door),
    so a message refused by one is refused by the other. The configured limits come in the
    validation context (`validation.context_of(settings)`)."""

    # an agent's unknown field is refused, not dropped: a misspelt "speker" would lose the speaker
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    anima_id: AnimaId | None = Field(None, description="optional; when given it must be the anima addressed")
    conversation_id: ExternalId
    message_id: ExternalId
    role: Role
    speaker: Name | None = None
    content: MessageText
    created_at: Timestamp = Field(description="ISO-8601 with its UTC offset, e.g. 2023-05-08T13:56:00+08:00")
    platform: Name | None = None
    title: Title | None = None
    debug: Flag | None = None
    metadata: JsonObject | None = None

    _where: str = PrivateAttr(default="")  # "file:line" of the archive line, for later errors


class ArchiveRecord(MessageRecord):
    """One line of the archive format (shared/data/README.md): a message and its anima. A
    line may carry keys of the system that wrote it: they are not stored, and the import
    names them (`ImportStats.ignored`), so a misspelt key is seen rather than lost unseen."""

    model_config = ConfigDict(extra="ignore")  # the rest of MessageRecord's config stands

    anima_id: AnimaId


class ArchiveError(InputError):
    """A bad archive line; the message names the file and the line. `anima import` exits 1
    on one, with nothing written (README, "Limits and guards")."""

    exit_code = 1
    label = "import aborted, nothing written"


class ImportConflict(ArchiveError):
    """A line that contradicts what is stored (a message's role, speaker, content or time; a
    conversation's title or debug flag). Its text is the CLI's (place, field, and --update);
    `detail` is the conflict alone, for a door that gives its own advice (the HTTP API)."""

    def __init__(self, where: str, *, field: str, detail: str, message_id: str) -> None:
        super().__init__(f"{where}: field '{field}': {detail}; re-run with --update to apply it")
        self.field = field
        self.detail = detail
        self.message_id = message_id


def field_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """(field, reason) for every error of a record, in the words the import uses."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "line"
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "string_too_short":
            msg = "required field is empty"
        elif err["type"] == "extra_forbidden":
            msg = f"not a field of a message (its fields: {', '.join(MessageRecord.model_fields)})"
        out.append((loc, msg))
    return out


def describe(exc: ValidationError) -> str:
    return "; ".join(f"field '{loc}': {msg}" for loc, msg in field_errors(exc))


def parse_lines(
    lines: Iterable[str],
    source: str,
    settings: Settings | None = None,
    ignored: dict[str, tuple[int, str]] | None = None,
) -> Iterator[ArchiveRecord]:
    """Validate every line; raise ArchiveError naming `source:line` on the first bad one.
    `settings` gives the limits (message size, timestamp window); the defaults otherwise.
    `ignored` counts, per key the format does not have, the lines that held it, with the
    first one's place (`source:line`)."""
    context = context_of(settings)
    known = ArchiveRecord.model_fields.keys()
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ArchiveError(f"{source}:{lineno}: broken JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise ArchiveError(f"{source}:{lineno}: JSON nested too deeply to read") from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise ArchiveError(f"{source}:{lineno}: JSON not readable: {exc}") from None
        if not isinstance(obj, dict):
            raise ArchiveError(f"{source}:{lineno}: a line must be a JSON object, got {type(obj).__name__}")
        try:
            rec = ArchiveRecord.model_validate(obj, context=context)
        except ValidationError as exc:
            raise ArchiveError(f"{source}:{lineno}: {describe(exc)}") from None
        except RecursionError:
            raise ArchiveError(f"{source}:{lineno}: a field is nested too deeply") from None
        rec._where = f"{source}:{lineno}"
        if ignored is not None:
            for key in obj.keys() - known:
                n, first = ignored.get(key, (0, rec._where))
                ignored[key] = (n + 1, first)
        yield rec


@dataclass
class ImportStats:
    files: int = 0
    lines: int = 0
    messages_added: int = 0
    conversations_added: int = 0
    skipped_cleaned: int = 0  # lines of conversations the night's cleanup deleted (tombstoned)
    messages_updated: int = 0  # with update=True: stored messages whose line changed them
    conversations_updated: int = 0  # with update=True: a title or debug flag changed
    animas: set[str] = field(default_factory=set)
    ignored: dict[str, tuple[int, str]] = field(default_factory=dict)  # a key not in the format: lines, first

    def written(self) -> dict[str, int]:
        """Rows changed per table, for store.planner_stats.keep_fresh."""
        messages = self.messages_added + self.messages_updated
        return {"message": messages, "conversation": self.conversations_added, "recall_word": messages}


CHUNK = 2000  # records per round trip: bounded memory for any archive size, few statements
# the stored message fields an archive line may not change silently
MESSAGE_FIELDS = ("role", "speaker", "content", "created_at")


def import_records(
    conn: Connection,
    records: Iterable[ArchiveRecord],
    audit: Audit,
    stats: ImportStats,
    *,
    update: bool = False,
) -> None:
    """Insert records inside the caller's transaction. Conversations take created_at /
    updated_at from their messages (min / max), and keep platform, title, debug when given.
    Conversations the cleanup deleted stay deleted (restore them from memory_event instead).

    Records go in chunks: one upsert per conversation of the chunk and one INSERT for all its
    messages, so a 10,000-message batch is a handful of statements, not 20,000.

    A line whose message_id is stored with other content (role, speaker, content, created_at)
    or whose `title` or `debug` differs from its stored conversation is a conflict
    (ImportConflict naming the line and field), unless `update`, which applies the line as an
    audited update.

    The store's first day (store/calendar.py) moves earlier in the same transaction when the
    records hold a message older than the known first message: one comparison, no scan."""
    chunk: list[ArchiveRecord] = []
    earliest: datetime | None = None
    for rec in records:
        chunk.append(rec)
        if len(chunk) >= CHUNK:
            earliest = _earlier(earliest, _import_chunk(conn, chunk, audit, stats, update))
            chunk = []
    if chunk:
        earliest = _earlier(earliest, _import_chunk(conn, chunk, audit, stats, update))
    if earliest is not None:  # once, at the end: the calendar row is locked only when it moves
        move_first_message(conn, audit, earliest, "messages")


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _import_chunk(
    conn: Connection, chunk: list[ArchiveRecord], audit: Audit, stats: ImportStats, update: bool
) -> datetime | None:
    """Import one chunk; the earliest created_at of its messages now stored (None if none)."""
    tombstones = cleaned_conversations(conn, ((r.anima_id, r.conversation_id) for r in chunk))
    kept: list[ArchiveRecord] = []
    for rec in chunk:
        stats.lines += 1
        stats.animas.add(rec.anima_id)
        if (rec.anima_id, rec.conversation_id) in tombstones:
            stats.skipped_cleaned += 1
        else:
            kept.append(rec)
    by_conversation: dict[tuple[str, str], list[ArchiveRecord]] = {}
    for rec in kept:
        by_conversation.setdefault((rec.anima_id, rec.conversation_id), []).append(rec)
    _check_conversations(conn, by_conversation, audit, stats, update)
    for (anima_id, conversation_id), recs in by_conversation.items():
        _upsert_conversation(conn, anima_id, conversation_id, recs, audit, stats)
    if kept:
        stats.messages_added += conn.execute(
            """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at, metadata)
               SELECT a, c, e, r, s, t, ts, md::jsonb
               FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                           %s::timestamptz[], %s::text[]) AS u(a, c, e, r, s, t, ts, md)
               ON CONFLICT (anima_id, conversation_id, external_id) DO NOTHING""",
            (
                [r.anima_id for r in kept],
                [r.conversation_id for r in kept],
                [r.message_id for r in kept],
                [r.role for r in kept],
                [r.speaker for r in kept],
                [r.content for r in kept],
                [r.created_at for r in kept],
                [json.dumps(r.metadata or {}) for r in kept],
            ),
        ).rowcount
        _check_messages(conn, kept, audit, stats, update)
    # every kept line is stored now (inserted, already there, or updated to it): a conflict
    # would have raised and rolled the whole import back
    return min((r.created_at for r in kept), default=None)


def _where(rec: ArchiveRecord) -> str:
    return rec._where or f"message {rec.message_id!r}"


CONVERSATION_FIELDS = ("title", "debug")  # what a line may not change silently (platform defaults)


def _check_conversations(
    conn: Connection,
    by_conversation: dict[tuple[str, str], list[ArchiveRecord]],
    audit: Audit,
    stats: ImportStats,
    update: bool,
) -> None:
    """A line's `title` or `debug` that differs from its stored conversation's (a title never
    set is no conflict: the line gives the first one): a conflict, or with `update` an audited
    update (the upsert then writes the line's value)."""
    given = [
        key
        for key, recs in by_conversation.items()
        if any(getattr(r, f) is not None for r in recs for f in CONVERSATION_FIELDS)
    ]
    if not given:
        return
    stored = {
        (r["anima_id"], r["id"]): r
        for r in conn.execute(
            """SELECT c.anima_id, c.id, c.title, c.debug FROM conversation c
               JOIN unnest(%s::text[], %s::text[]) AS k(a, i) ON c.anima_id = k.a AND c.id = k.i""",
            ([a for a, _ in given], [i for _, i in given]),
        ).fetchall()
    }
    for key in given:
        if key not in stored:
            continue  # a new conversation takes what its lines give
        was = {f: stored[key][f] for f in CONVERSATION_FIELDS}
        for rec in by_conversation[key]:
            for f in CONVERSATION_FIELDS:
                new = getattr(rec, f)
                if new is None or was[f] is None or new == was[f]:
                    continue
                if not update:
                    raise ImportConflict(
                        _where(rec),
                        field=f,
                        detail=f"conversation {rec.conversation_id!r} is stored with {f}={_shown(was[f])}, "
                        f"this line says {_shown(new)}",
                        message_id=rec.message_id,
                    )
                audit.for_anima(rec.anima_id).record(
                    "conversation", rec.conversation_id, "update", {f: was[f]}, {f: new}
                )
                stats.conversations_updated += 1
                was[f] = new


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _check_messages(
    conn: Connection, recs: list[ArchiveRecord], audit: Audit, stats: ImportStats, update: bool
) -> None:
    """After the INSERT (new lines are stored as given): any line whose stored message differs
    is a conflict, or with `update` an audited update of the stored message."""
    stored = {
        (r["anima_id"], r["conversation_id"], r["external_id"]): r
        for r in conn.execute(
            """SELECT m.id, m.anima_id, m.conversation_id, m.external_id, m.role, m.speaker, m.content,
                      m.created_at
               FROM message m JOIN unnest(%s::text[], %s::text[], %s::text[]) AS k(a, c, e)
                 ON m.anima_id = k.a AND m.conversation_id = k.c AND m.external_id = k.e""",
            (
                [r.anima_id for r in recs],
                [r.conversation_id for r in recs],
                [r.message_id for r in recs],
            ),
        ).fetchall()
    }
    for rec in recs:
        row = stored.get((rec.anima_id, rec.conversation_id, rec.message_id))
        if row is None:
            continue
        changed = [f for f in MESSAGE_FIELDS if row[f] != getattr(rec, f)]
        if not changed:
            continue
        if not update:
            raise ImportConflict(
                _where(rec),
                field=changed[0],
                detail=f"message_id {rec.message_id!r} is already stored with a different {', '.join(changed)}",
                message_id=rec.message_id,
            )
        after = one(
            conn.execute(
                """UPDATE message SET role = %s, speaker = %s, content = %s, created_at = %s WHERE id = %s
               RETURNING id, role, speaker, content, created_at""",
                (rec.role, rec.speaker, rec.content, rec.created_at, row["id"]),
            )
        )
        before = {k: row[k] for k in ("id", *MESSAGE_FIELDS)}
        audit.for_anima(rec.anima_id).record("message", row["id"], "update", before, dict(after))
        stats.messages_updated += 1
        stored[(rec.anima_id, rec.conversation_id, rec.message_id)] = {**row, **after}


def _last_given(recs: list[ArchiveRecord], name: str) -> Any:
    """The last value a record of the chunk gave for a conversation field (None: not given)."""
    return next((v for r in reversed(recs) if (v := getattr(r, name)) is not None), None)


def _upsert_conversation(
    conn: Connection,
    anima_id: str,
    conversation_id: str,
    recs: list[ArchiveRecord],
    audit: Audit,
    stats: ImportStats,
) -> None:
    platform, title, debug = (_last_given(recs, k) for k in ("platform", "title", "debug"))
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
            conversation_id,
            anima_id,
            platform,
            title,
            debug,
            min(r.created_at for r in recs),
            max(r.created_at for r in recs),
            platform,
            title,
            debug,
        ),
    ).fetchone()
    if row and row["inserted"]:
        stats.conversations_added += 1
        audit.for_anima(anima_id).record(
            "conversation",
            conversation_id,
            "import",
            None,
            {"platform": platform or "chat", "title": title, "debug": bool(debug)},
        )


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
             AND m.forgotten_at IS NULL
           ORDER BY m.anima_id""",
        (start, end),
    ).fetchall()
    return [r["anima_id"] for r in rows]


def debug_conversations(conn: Connection, anima_id: str) -> set[str]:
    """Ids of the anima's debug conversations (test harnesses, prompt checks)."""
    rows = conn.execute("SELECT id FROM conversation WHERE anima_id = %s AND debug", (anima_id,)).fetchall()
    return {r["id"] for r in rows}


def day_chars(conn: Connection, anima_id: str, start: datetime, end: datetime) -> int:
    """Characters the anima's messages of [start, end) hold: what a night has to read."""
    row = one(
        conn.execute(
            """SELECT coalesce(sum(length(content)), 0) AS n FROM message
           WHERE anima_id = %s AND created_at >= %s AND created_at < %s""",
            (anima_id, start, end),
        )
    )
    return int(row["n"])


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
             AND c.platform <> 'cron' AND NOT c.debug AND m.role = ANY(%s) AND m.forgotten_at IS NULL
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


_CONVERSATION_COLUMNS = "id, anima_id, platform, title, debug, created_at, updated_at, closed_at"


def open_conversation(
    conn: Connection,
    audit: Audit,
    anima_id: str,
    conversation_id: str,
    *,
    platform: str | None = None,
    title: str | None = None,
    debug: bool | None = None,
) -> dict[str, Any]:
    """Create a conversation before its first message, or set its platform / title / debug
    flag (only what is given changes) and reopen it. Audited as 'open' with before/after.
    A conversation the night's cleanup deleted is not recreated (InputError): restore it."""
    if cleaned_conversations(conn, [(anima_id, conversation_id)]):
        raise InputError(
            f"conversation {conversation_id!r} was deleted by the night's cleanup; "
            "restore it from memory_event instead of reopening it",
            field="conversation_id",
        )
    before = conn.execute(
        f"SELECT {_CONVERSATION_COLUMNS} FROM conversation WHERE anima_id = %s AND id = %s FOR UPDATE",
        (anima_id, conversation_id),
    ).fetchone()
    row = one(
        conn.execute(
            f"""INSERT INTO conversation (id, anima_id, platform, title, debug)
            VALUES (%s, %s, COALESCE(%s, 'chat'), %s, COALESCE(%s, false))
            ON CONFLICT (anima_id, id) DO UPDATE SET
                platform = COALESCE(%s, conversation.platform),
                title = COALESCE(%s, conversation.title),
                debug = COALESCE(%s, conversation.debug),
                closed_at = NULL
            RETURNING {_CONVERSATION_COLUMNS}""",
            (conversation_id, anima_id, platform, title, debug, platform, title, debug),
        )
    )
    if before != row:
        audit.for_anima(anima_id).record("conversation", conversation_id, "open", before, row)
    return row


def close_conversation(conn: Connection, audit: Audit, anima_id: str, conversation_id: str) -> dict[str, Any]:
    """Mark a conversation closed (closed_at = now, kept when already closed). Audited as 'close'.
    NotFound when the anima has no such conversation."""
    before = conn.execute(
        f"SELECT {_CONVERSATION_COLUMNS} FROM conversation WHERE anima_id = %s AND id = %s FOR UPDATE",
        (anima_id, conversation_id),
    ).fetchone()
    if before is None:
        raise NotFound("conversation", repr(conversation_id), field="conversation_id")
    if before["closed_at"] is not None:
        return before
    row = one(
        conn.execute(
            f"""UPDATE conversation SET closed_at = now() WHERE anima_id = %s AND id = %s
            RETURNING {_CONVERSATION_COLUMNS}""",
            (anima_id, conversation_id),
        )
    )
    audit.for_anima(anima_id).record("conversation", conversation_id, "close", before, row)
    return row

"""The layers around semantic memory: emotional anchors (limbic), autobiographical
narratives, the six self blocks (versioned), temporal summaries and the dream journal.
Every write is audited; narratives and anchors are deprecated, never deleted."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from psycopg.types.json import Jsonb

from anima_pipeline.core.errors import InputError
from anima_pipeline.core.types import LEVELS, SELF_BLOCKS
from anima_pipeline.store.db import Connection, one
from anima_pipeline.store.events import Audit


def _insert(conn: Connection, table: str, values: dict[str, Any]) -> dict:
    cols = ", ".join(values)
    placeholders = ", ".join(["%s"] * len(values))
    params = [
        Jsonb(v) if isinstance(v, (dict, list)) and not _is_array_col(k) else v for k, v in values.items()
    ]
    return one(conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({placeholders}) RETURNING *", params))


def _is_array_col(col: str) -> bool:
    return col in ("source_memory_ids", "source_sessions")


class _Repo:
    """A repository on one connection; `audit` is needed only by the methods that write."""

    def __init__(self, conn: Connection, audit: Audit | None = None) -> None:
        self.conn, self.audit = conn, audit

    def _record(self, table: str, row_id: Any, op: str, before: dict | None, after: dict | None) -> None:
        assert self.audit is not None
        self.audit.record(table, row_id, op, before, after)


class _Layer(_Repo):
    """A layer whose rows are created whole from a tool's values (and deprecated, never deleted)."""

    table: str

    def create(self, anima_id: str, values: dict[str, Any]) -> dict:
        row = _insert(self.conn, self.table, {"anima_id": anima_id, **values})
        self._record(self.table, row["id"], "create", None, row)
        return row


class AnchorRepo(_Layer):
    table = "emotional_anchor"

    def between(self, anima_id: str, start: datetime, end: datetime) -> list[dict]:
        return self.conn.execute(
            """SELECT * FROM emotional_anchor WHERE anima_id = %s AND status = 'active'
               AND occurred_at >= %s AND occurred_at < %s ORDER BY occurred_at, id""",
            (anima_id, start, end),
        ).fetchall()

    def timeline(self, anima_id: str) -> list[dict]:
        """Every anchor of the anima, whatever its status, oldest first: when, emotion,
        valence and trigger (what `anima demo` shows)."""
        return self.conn.execute(
            "SELECT occurred_at, emotion, valence, trigger FROM emotional_anchor WHERE anima_id = %s ORDER BY occurred_at",
            (anima_id,),
        ).fetchall()


class AutobiographyRepo(_Layer):
    table = "autobiographical_memory"

    def get(self, narrative_id: int) -> dict | None:
        return self.conn.execute(
            "SELECT * FROM autobiographical_memory WHERE id = %s", (narrative_id,)
        ).fetchone()

    def deprecate(self, narrative_id: int, reason: str) -> dict:
        before = self.get(narrative_id)
        row = one(
            self.conn.execute(
                """UPDATE autobiographical_memory SET status = 'deprecated', deprecated_reason = %s, updated_at = now()
               WHERE id = %s RETURNING *""",
                (reason, narrative_id),
            )
        )
        self._record(self.table, narrative_id, "deprecate", before, row)
        return row

    def active(self, anima_id: str) -> list[dict]:
        return self.conn.execute(
            """SELECT * FROM autobiographical_memory WHERE anima_id = %s AND status = 'active'
               ORDER BY occurred_from NULLS LAST, id""",
            (anima_id,),
        ).fetchall()


class SelfBlockRepo(_Repo):
    def all(self, anima_id: str) -> dict[str, str]:
        """The six blocks in their fixed order; a block never written is empty."""
        rows = self.conn.execute(
            "SELECT name, content FROM self_block WHERE anima_id = %s", (anima_id,)
        ).fetchall()
        found = {r["name"]: r["content"] for r in rows}
        return {name: found.get(name, "") for name in SELF_BLOCKS}

    def write(self, anima_id: str, name: str, content: str, updated_by: str) -> bool:
        """Write a new version (the old one goes to history); False when nothing changed."""
        if name not in SELF_BLOCKS:
            raise InputError(f"unknown self block {name!r}; one of {', '.join(SELF_BLOCKS)}")
        before = self.conn.execute(
            "SELECT * FROM self_block WHERE anima_id = %s AND name = %s FOR UPDATE", (anima_id, name)
        ).fetchone()
        if before and before["content"] == content:
            return False
        if before:
            self.conn.execute(
                """INSERT INTO self_block_history (anima_id, name, version, content, updated_by, updated_at)
                   VALUES (%s, %s, %s, %s, %s, %s)""",
                (
                    anima_id,
                    name,
                    before["version"],
                    before["content"],
                    before["updated_by"],
                    before["updated_at"],
                ),
            )
        row = self.conn.execute(
            """INSERT INTO self_block (anima_id, name, content, updated_by) VALUES (%s, %s, %s, %s)
               ON CONFLICT (anima_id, name) DO UPDATE SET content = EXCLUDED.content,
                   version = self_block.version + 1, updated_by = EXCLUDED.updated_by, updated_at = now()
               RETURNING *""",
            (anima_id, name, content, updated_by),
        ).fetchone()
        self._record("self_block", name, "write", before, row)
        return True


class TemporalRepo(_Repo):
    def upsert(self, anima_id: str, level: str, start: date, end: date, content: str, stats: dict) -> dict:
        """Re-runs replace the summary of a period instead of adding a second one."""
        if level not in LEVELS:
            raise InputError(f"unknown summary level {level!r}; one of {', '.join(LEVELS)}")
        before = self.get(anima_id, level, start)
        row = one(
            self.conn.execute(
                """INSERT INTO temporal_summary (anima_id, level, period_start, period_end, content, stats)
               VALUES (%s, %s, %s, %s, %s, %s)
               ON CONFLICT (anima_id, level, period_start) DO UPDATE SET period_end = EXCLUDED.period_end,
                   content = EXCLUDED.content, stats = EXCLUDED.stats, updated_at = now()
               RETURNING *""",
                (anima_id, level, start, end, content, Jsonb(stats)),
            )
        )
        if before is None or before["content"] != content:
            self._record("temporal_summary", row["id"], "upsert", before, row)
        return row

    def get(self, anima_id: str, level: str, start: date) -> dict | None:
        return self.conn.execute(
            "SELECT * FROM temporal_summary WHERE anima_id = %s AND level = %s AND period_start = %s",
            (anima_id, level, start),
        ).fetchone()

    def between(self, anima_id: str, level: str, start: date, end: date) -> list[dict]:
        return self.conn.execute(
            """SELECT * FROM temporal_summary WHERE anima_id = %s AND level = %s
               AND period_start >= %s AND period_start <= %s ORDER BY period_start""",
            (anima_id, level, start, end),
        ).fetchall()

    def animas_with_days(self, first: date, last: date) -> set[str]:
        """The animas with a day summary of a day in [first, last]."""
        rows = self.conn.execute(
            """SELECT DISTINCT anima_id FROM temporal_summary
               WHERE level = 'day' AND period_start >= %s AND period_start <= %s""",
            (first, last),
        ).fetchall()
        return {r["anima_id"] for r in rows}

    def all(self, anima_id: str) -> list[dict]:
        """Every summary of the anima by level, then period: level, period_start and content."""
        return self.conn.execute(
            "SELECT level, period_start, content FROM temporal_summary WHERE anima_id = %s ORDER BY level, period_start",
            (anima_id,),
        ).fetchall()


# The dream journal's list columns, in table order: what one night's entry holds.
DREAM_FIELDS = (
    "aha_moments",
    "creative_connections",
    "confidence_updates",
    "next_session_actions",
    "bank_suggestions",
)


class DreamRepo(_Repo):
    def get(self, anima_id: str, day: date) -> dict | None:
        """The anima's dream journal entry of `day` (the whole row), or None."""
        return self.conn.execute(
            "SELECT * FROM dream_journal WHERE anima_id = %s AND day = %s", (anima_id, day)
        ).fetchone()

    def upsert(self, anima_id: str, day: date, entry: dict[str, list]) -> dict:
        before = self.conn.execute(
            "SELECT * FROM dream_journal WHERE anima_id = %s AND day = %s", (anima_id, day)
        ).fetchone()
        keys = DREAM_FIELDS
        values = [Jsonb(entry.get(k, [])) for k in keys]
        row = one(
            self.conn.execute(
                f"""INSERT INTO dream_journal (anima_id, day, {", ".join(keys)}) VALUES (%s, %s, %s, %s, %s, %s, %s)
                ON CONFLICT (anima_id, day) DO UPDATE SET {", ".join(f"{k} = EXCLUDED.{k}" for k in keys)},
                    updated_at = now()
                RETURNING *""",
                [anima_id, day, *values],
            )
        )
        self._record("dream_journal", row["id"], "upsert", before, row)
        return row

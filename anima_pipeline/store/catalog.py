"""One catalog of what the store remembers (docs/forget.md, "What the store keeps").

Every table of the memory database, and every column of it that holds text, JSON or an
array: what the column holds, which column names the row's anima, what its text derives from
(the messages, the memories, the days), and what a purge, a snapshot and an export do with
the table. Forget (memory/forget.py, store/erasure.py), the store as of a day
(store/as_of.py), replay and promote (store/shadow_reads.py) and the export
(memory/workspace.py) read their lists here; none keeps its own. `missing` compares the
catalog with a live schema: a test walks the live store's and a shadow store's columns
(anima_pipeline_tests/store/test_catalog.py), and a purge refuses to run on a store that has a
text column the catalog does not know, since it could not say whether the purge reaches it.

What a column holds:

- ``said``: text as it was said (a message, a conversation's title, a message's metadata);
- ``learnt``: text written from what was said, by a night or the agent (a memory, a summary,
  a dream entry, a self block, a narrative, an anchor's note, a model's words in a step's
  stats): a purge of its sources reaches it, by lineage and where it quotes them;
- ``audit``: copies of rows as they were (the audit log's before/after);
- ``index``: words or vectors computed from a row's text, which follow that row;
- ``key``: ids, names of steps and animas, file names: no text of anyone's;
- ``label``: one of a fixed set of words (a status, a type, an op, an engine);
- ``secret``: what an API key is checked by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from anima_pipeline.store.db import Connection

Holds = Literal["said", "learnt", "audit", "index", "key", "label", "secret"]
Source = Literal["messages", "memories", "days"]
# How the store as of a day treats the table's rows (store/as_of.py): undone from the audit
# log; kept whole (the archive: a replay sleeps the same talk again); undone from the log and
# rows of later days dropped (their `day`); the log itself (events of later days dropped);
# copied as they are; the schema's own (written by the migrations).
Snapshot = Literal["audited", "archive", "by_day", "log", "copied", "schema"]
# What a purge of a message, conversation or memory does with the table's rows
# (memory/forget.py): they are the target; they follow it by lineage only (ids, sources:
# never by what their text quotes, since they are what the anima knows); and, by lineage and
# wherever their text quotes the purged text: erased; dropped and their step run again (by
# day); their versions since dropped; their quoting text scrubbed. Or nothing (no content).
Purge = Literal["target", "lineage", "recompute", "versions", "erase", "scrub", "none"]


@dataclass(frozen=True)
class Column:
    name: str
    holds: Holds
    sources: tuple[Source, ...] = ()


@dataclass(frozen=True)
class Table:
    name: str
    anima: str | None  # the column naming the row's anima; None: the store's own
    snapshot: Snapshot
    purge: Purge
    columns: tuple[Column, ...]
    # exists only where pgvector is available (migration 0011)
    optional: bool = False
    # the rows a replay's diff counts (store/shadow_reads.py), as a condition; None: not counted
    counted: str | None = None


def _c(name: str, holds: Holds, *sources: Source) -> Column:
    return Column(name, holds, sources)


_ANIMA = _c("anima_id", "key")
_MSG = ("messages",)
_MEM = ("memories",)

# In the order a purge of a whole anima deletes them: rows that point at others first.
TABLES: tuple[Table, ...] = (
    Table(
        "review_proposal",
        "anima_id",
        "by_day",
        "erase",
        (
            _ANIMA,
            _c("run_id", "key"),
            _c("step", "key"),
            _c("tool", "label"),
            _c("input", "learnt", "memories"),
            _c("reason", "learnt", "memories"),
            _c("memory_ids", "key"),
            _c("status", "label"),
            _c("decided_by", "key"),
            _c("decision", "learnt", "memories"),
        ),
    ),
    Table(
        "memory_reference",
        "anima_id",
        "audited",
        "lineage",
        (_ANIMA, _c("conversation_id", "key")),
    ),
    Table(
        "emotional_anchor",
        "anima_id",
        "audited",
        "erase",
        (
            _ANIMA,
            _c("conversation_id", "key"),
            _c("emotion", "learnt", "messages"),
            _c("trigger", "learnt", "messages"),
            _c("note", "learnt", "messages"),
            _c("status", "label"),
        ),
        counted="status = 'active'",
    ),
    Table(
        "autobiographical_memory",
        "anima_id",
        "audited",
        "erase",
        (
            _ANIMA,
            _c("title", "learnt", "messages", "memories"),
            _c("narrative", "learnt", "messages", "memories"),
            _c("significance", "label"),
            _c("source_memory_ids", "key"),
            _c("source_sessions", "key"),
            _c("status", "label"),
            _c("deprecated_reason", "learnt", "memories"),
        ),
        counted="status = 'active'",
    ),
    Table(
        "self_block_history",
        "anima_id",
        "copied",
        "versions",
        (
            _ANIMA,
            _c("name", "label"),
            _c("content", "learnt", "memories", "days"),
            _c("updated_by", "key"),
        ),
    ),
    Table(
        "self_block",
        "anima_id",
        "audited",
        "versions",
        (
            _ANIMA,
            _c("name", "label"),
            _c("content", "learnt", "memories", "days"),
            _c("updated_by", "key"),
        ),
        counted="true",
    ),
    Table(
        "temporal_summary",
        "anima_id",
        "audited",
        "recompute",
        (
            _ANIMA,
            _c("level", "label"),
            _c("content", "learnt", "messages", "memories", "days"),
            _c("stats", "learnt", "days"),
        ),
        counted="true",
    ),
    Table(
        "dream_journal",
        "anima_id",
        "audited",
        "recompute",
        (
            _ANIMA,
            _c("aha_moments", "learnt", "memories"),
            _c("creative_connections", "learnt", "memories"),
            _c("confidence_updates", "learnt", "memories"),
            _c("next_session_actions", "learnt", "memories"),
            _c("bank_suggestions", "learnt", "memories"),
        ),
        counted="true",
    ),
    Table(
        "semantic_memory",
        "anima_id",
        "audited",
        "lineage",
        (
            _ANIMA,
            _c("type", "label"),
            _c("content", "learnt", "messages"),
            _c("source_sessions", "key"),
            _c("status", "label"),
            _c("deprecated_reason", "learnt", "memories"),
            _c("search", "index", "memories"),
            _c("fts", "index", "memories"),
        ),
    ),
    Table(
        "session_flush",
        "anima_id",
        "archive",
        "lineage",
        (
            _ANIMA,
            _c("conversation_id", "key"),
            _c("memory_ids", "key"),
            _c("stats", "learnt", "messages"),
            _c("engine", "label"),
        ),
    ),
    Table(
        "session_summary",
        "anima_id",
        "archive",
        "erase",
        (
            _ANIMA,
            _c("conversation_id", "key"),
            _c("content", "learnt", "messages"),
            _c("engine", "label"),
        ),
    ),
    Table(
        "message",
        "anima_id",
        "archive",
        "target",
        (
            _ANIMA,
            _c("conversation_id", "key"),
            _c("external_id", "key"),
            _c("role", "label"),
            _c("speaker", "said", "messages"),
            _c("content", "said", "messages"),
            _c("metadata", "said", "messages"),
            _c("fts", "index", "messages"),
        ),
    ),
    Table(
        "conversation",
        "anima_id",
        "archive",
        "target",
        (_c("id", "key"), _ANIMA, _c("platform", "label"), _c("title", "said", "messages")),
    ),
    Table(
        "sleep_state",
        "anima_id",
        "by_day",
        "scrub",
        (
            _ANIMA,
            _c("step", "key"),
            _c("status", "label"),
            _c("stats", "learnt", "memories", "days"),
            _c("run_id", "key"),
            _c("error", "learnt", "memories"),
        ),
    ),
    Table(
        "recall_word", "anima_id", "copied", "lineage", (_ANIMA, _c("word", "index", "messages", "memories"))
    ),
    Table(
        "embedding",
        "anima_id",
        "copied",
        "lineage",
        (_ANIMA, _c("kind", "label"), _c("model_id", "key"), _c("v", "index", "messages", "memories")),
        optional=True,
    ),
    Table("embedding_model", None, "copied", "none", (_c("model_id", "key"),), optional=True),
    Table(
        "memory_event",
        "anima_id",
        "log",
        "scrub",
        (
            _ANIMA,
            _c("table_name", "key"),
            _c("memory_id", "key"),
            _c("op", "label"),
            _c("before", "audit", "messages", "memories", "days"),
            _c("after", "audit", "messages", "memories", "days"),
            _c("run_id", "key"),
            _c("step", "key"),
        ),
    ),
    Table(
        "api_key",
        "anima_id",
        "copied",
        "none",
        (_ANIMA, _c("name", "key"), _c("prefix", "secret"), _c("key_hash", "secret")),
    ),
    Table("store_calendar", None, "copied", "none", (_c("legacy_files", "key"),)),
    Table("schema_migration", None, "schema", "none", (_c("name", "key"), _c("checksum", "key"))),
)

_BY_NAME = {t.name: t for t in TABLES}
# the purge rules under which a row is reached by what its text quotes
QUOTED: tuple[Purge, ...] = ("erase", "recompute", "versions", "scrub")

# The pages of `anima export --markdown` (memory/workspace.py), relative to an anima's folder,
# and what each is written from: a purge's `--export` rewrites them, and an export removes
# the ones it no longer has.
EXPORT_PAGES: tuple[tuple[str, tuple[Source, ...]], ...] = (
    ("MEMORY.md", ("memories",)),
    ("memory/*.md", ("memories", "days")),
    ("bank/entities/*.md", ("memories",)),
    ("bank/concepts/*.md", ("memories",)),
)

# What the store's neighbours keep: Dagster's event log holds each (day, step)
# materialization's metadata, ids, counts and sizes, never text (night/steps/previews.py);
# ANIMA_HOME's logs/ holds deep sleep's per-round op logs, removed by a purge of the anima.
OUTSIDE: tuple[tuple[str, Holds], ...] = (
    ("dagster: materialization metadata and previews", "key"),
    ("ANIMA_HOME/logs/deep_sleep_*/<anima>.json", "learnt"),
)


def table(name: str) -> Table:
    return _BY_NAME[name]


def names(*, snapshot: Snapshot | None = None, purge: Purge | None = None) -> tuple[str, ...]:
    """The tables (in purge order) with that snapshot rule and/or that purge rule."""
    return tuple(
        t.name
        for t in TABLES
        if (snapshot is None or t.snapshot == snapshot) and (purge is None or t.purge == purge)
    )


def anima_tables() -> tuple[str, ...]:
    """The tables whose rows belong to one anima and go with it, in purge order (children
    first); the audit log, its API keys (revoked) and its vectors (pgvector only) apart."""
    return tuple(
        t.name for t in TABLES if t.anima and t.name not in ("memory_event", "api_key") and not t.optional
    )


def learnt_columns(*sources: Source) -> dict[str, tuple[str, ...]]:
    """Per table, its columns that hold text learnt from any of `sources` (all when none),
    for the tables a purge reaches by what they quote (QUOTED; the audit log apart, scanned
    on its own): the places a purge scans for the purged text."""
    out: dict[str, tuple[str, ...]] = {}
    for t in TABLES:
        if t.purge not in QUOTED or t.name == "memory_event":
            continue
        cols = tuple(
            c.name
            for c in t.columns
            if c.holds == "learnt" and (not sources or set(c.sources) & set(sources))
        )
        if cols:
            out[t.name] = cols
    return out


def counted() -> dict[str, str]:
    """The layers a replay's diff counts beside memories, with which of their rows count."""
    return {t.name: t.counted for t in TABLES if t.counted is not None}


# the column types a catalog entry is required for: text, JSON, arrays and derived vectors
_TEXTUAL = """data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY', 'tsvector')
              OR udt_name = 'vector'"""


def missing(conn: Connection) -> list[str]:
    """The live schema's tables and text, JSON and array columns that the catalog does not
    know ("table" or "table.column"), and the catalog's that the schema lacks (an optional
    table absent is not missing). Empty when the two agree."""
    rows = conn.execute(
        f"""SELECT c.table_name, c.column_name FROM information_schema.columns c
            JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' AND ({_TEXTUAL})
            ORDER BY 1, 2"""
    ).fetchall()
    tables = {
        r["table_name"]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        ).fetchall()
    }
    live = {(r["table_name"], r["column_name"]) for r in rows}
    known = {(t.name, c.name) for t in TABLES for c in t.columns}
    out = sorted(t for t in tables if t not in _BY_NAME)
    out += sorted(f"{t}.{c}" for t, c in live - known if t in _BY_NAME)
    out += sorted(f"{t}.{c} (catalogued, not in the schema)" for t, c in known - live if t in tables)
    out += sorted(
        f"{t.name} (catalogued, not in the schema)" for t in TABLES if t.name not in tables and not t.optional
    )
    return out

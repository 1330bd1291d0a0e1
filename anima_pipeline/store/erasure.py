"""The queries of forgetting (anima_pipeline/memory/forget.py is the cascade that calls them): what
derives from a conversation or a message, and the writes of a soft forget or a purge.

Lineage is by conversation: a memory cites the conversations it was said in
(`source_sessions`), an anchor names its conversation, a narrative its sessions and memories;
summaries, dreams and self blocks are per day. A message's own share of a memory is found by
text: the memories of its conversation that it matches (pg_trgm word similarity) and no other
remaining message of their sources matches.

Every statement is set-based over id arrays, served by the indexes of migration 0015, so a
forget grows with what it removes, not with the store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from anima_pipeline.core.errors import InternalError
from anima_pipeline.store import catalog
from anima_pipeline.store.db import Connection, one
from anima_pipeline.store.events import AGENT_STEP_PREFIX
from anima_pipeline.store.memories import SemanticMemory

# the step of an agent's corrections of a memory (anima_pipeline/memory/forget.py)
CORRECT_STEP = f"{AGENT_STEP_PREFIX}correct"

# a memory "comes from" a message when this much of it is found in the message's text
MESSAGE_MATCH = 0.5
# the tables a purge of a whole anima empties (children before parents; store/catalog.py)
ANIMA_TABLES = catalog.anima_tables()
_WORD = re.compile(r"[a-z]+")


# ---- reads ---------------------------------------------------------------------------------


def conversation_ids(conn: Connection, anima_id: str, ids: Iterable[str]) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM conversation WHERE anima_id = %s AND id = ANY(%s) ORDER BY id", (anima_id, list(ids))
    ).fetchall()
    return [r["id"] for r in rows]


def conversations_of(conn: Connection, anima_id: str) -> list[str]:
    """Every conversation id of the anima (a soft forget of the whole anima hides them all)."""
    rows = conn.execute("SELECT id FROM conversation WHERE anima_id = %s", (anima_id,)).fetchall()
    return [r["id"] for r in rows]


def message(conn: Connection, anima_id: str, message_id: int) -> dict | None:
    return conn.execute(
        """SELECT id, conversation_id, content, created_at, forgotten_at FROM message
           WHERE anima_id = %s AND id = %s""",
        (anima_id, message_id),
    ).fetchone()


def remaining_messages(conn: Connection, anima_id: str, conversation_id: str, without: list[int]) -> int:
    """Messages of the conversation that stay (not hidden, not among `without`)."""
    row = one(
        conn.execute(
            """SELECT count(*) AS n FROM message WHERE anima_id = %s AND conversation_id = %s
             AND forgotten_at IS NULL AND NOT (id = ANY(%s))""",
            (anima_id, conversation_id, without),
        )
    )
    return int(row["n"])


def message_ids(conn: Connection, anima_id: str, conversation_ids: list[str]) -> list[int]:
    rows = conn.execute(
        "SELECT id FROM message WHERE anima_id = %s AND conversation_id = ANY(%s) ORDER BY id",
        (anima_id, conversation_ids),
    ).fetchall()
    return [r["id"] for r in rows]


def message_days(conn: Connection, anima_id: str, ids: list[int], timezone: str) -> list[date]:
    rows = conn.execute(
        """SELECT DISTINCT (created_at AT TIME ZONE %s)::date AS day FROM message
           WHERE anima_id = %s AND id = ANY(%s) ORDER BY 1""",
        (timezone, anima_id, ids),
    ).fetchall()
    return [r["day"] for r in rows]


def texts(conn: Connection, table: str, ids: list[int]) -> list[str]:
    """The text of rows about to be erased (messages or memories): their words leave recall_word."""
    rows = conn.execute(f"SELECT content FROM {table} WHERE id = ANY(%s)", (ids,)).fetchall()
    return [r["content"] for r in rows]


def days_of_memories(conn: Connection, anima_id: str, ids: list[int]) -> set[date]:
    """The days whose nights wrote an event of these memories (their summaries and dreams
    may cite them)."""
    rows = conn.execute(
        """SELECT DISTINCT day FROM memory_event WHERE table_name = 'semantic_memory'
             AND memory_id = ANY(%s) AND anima_id = %s AND day IS NOT NULL""",
        ([str(i) for i in ids], anima_id),
    ).fetchall()
    return {r["day"] for r in rows}


def anchor_time(conn: Connection, anchor_id: int) -> datetime | None:
    """When the emotional anchor happened (None: no such anchor)."""
    row = conn.execute("SELECT occurred_at FROM emotional_anchor WHERE id = %s", (anchor_id,)).fetchone()
    return row["occurred_at"] if row else None


def memories_meeting(conn: Connection, anima_id: str, conversation_ids: list[str]) -> list[dict]:
    """Memories (any status) whose sources meet these conversations (the GIN index on sources)."""
    return conn.execute(
        """SELECT id, status, source_sessions, content, superseded_by FROM semantic_memory
           WHERE anima_id = %s AND source_sessions && %s::text[] ORDER BY id""",
        (anima_id, conversation_ids),
    ).fetchall()


def derived_from_message(conn: Connection, anima_id: str, msg: dict) -> list[dict]:
    """Memories of the message's conversation that the message says and no other remaining
    message of their sources says (their evidence is this message alone)."""
    return conn.execute(
        """SELECT s.id, s.status, s.source_sessions, s.content, s.superseded_by
           FROM semantic_memory s
           WHERE s.anima_id = %(anima)s AND s.source_sessions && ARRAY[%(conv)s]::text[]
             AND word_similarity(s.content, %(text)s) >= %(match)s
             AND NOT EXISTS (
                 SELECT 1 FROM message o
                 WHERE o.anima_id = %(anima)s AND o.conversation_id = ANY(s.source_sessions)
                   AND o.id <> %(id)s AND o.forgotten_at IS NULL
                   AND word_similarity(s.content, o.content) >= %(match)s)
           ORDER BY s.id""",
        {
            "anima": anima_id,
            "conv": msg["conversation_id"],
            "text": msg["content"],
            "id": msg["id"],
            "match": MESSAGE_MATCH,
        },
    ).fetchall()


def predecessors(conn: Connection, ids: list[int]) -> list[dict]:
    """Memories superseded (merged, split, replaced) into these, transitively."""
    return conn.execute(
        """WITH RECURSIVE up AS (
               SELECT id, superseded_by, source_sessions, status FROM semantic_memory WHERE superseded_by = ANY(%s)
               UNION
               SELECT s.id, s.superseded_by, s.source_sessions, s.status
               FROM semantic_memory s JOIN up ON s.superseded_by = up.id)
           SELECT * FROM up ORDER BY id""",
        (ids,),
    ).fetchall()


def merged_from(conn: Connection, memory_id: int) -> list[dict]:
    """The memories merged into this one (its direct predecessors), oldest first."""
    return conn.execute(
        """SELECT id, content, source_sessions FROM semantic_memory WHERE superseded_by = %s ORDER BY id""",
        (memory_id,),
    ).fetchall()


def corrected_wordings(conn: Connection, memory_ids: list[int]) -> list[SemanticMemory]:
    """What the user's corrections replaced: each memory as it read before a correction
    changed its text (light sleep treats those wordings as retired, never to learn again)."""
    if not memory_ids:
        return []
    rows = conn.execute(
        """SELECT before FROM memory_event
           WHERE table_name = 'semantic_memory' AND memory_id = ANY(%s) AND step = %s AND op = 'update'
             AND before IS NOT NULL AND before->>'content' IS DISTINCT FROM after->>'content'
           ORDER BY id""",
        ([str(i) for i in memory_ids], CORRECT_STEP),
    ).fetchall()
    return [SemanticMemory.model_validate({**r["before"], "status": "deprecated"}) for r in rows]


def proposals_of(conn: Connection, anima_id: str, memory_ids: list[int]) -> list[int]:
    """Review proposals (store/proposals.py) about these memories, any status."""
    rows = conn.execute(
        "SELECT id FROM review_proposal WHERE anima_id = %s AND memory_ids && %s::bigint[]",
        (anima_id, memory_ids),
    ).fetchall()
    return [r["id"] for r in rows]


def anchors_of(conn: Connection, anima_id: str, conversation_ids: list[str]) -> list[dict]:
    return conn.execute(
        "SELECT id, status FROM emotional_anchor WHERE anima_id = %s AND conversation_id = ANY(%s) ORDER BY id",
        (anima_id, conversation_ids),
    ).fetchall()


def narratives_of(
    conn: Connection, anima_id: str, conversation_ids: list[str], memory_ids: list[int]
) -> list[dict]:
    """Narratives told from these conversations or from these memories."""
    return conn.execute(
        """SELECT id, status FROM autobiographical_memory
           WHERE anima_id = %s AND (source_sessions && %s::text[] OR source_memory_ids && %s::bigint[])
           ORDER BY id""",
        (anima_id, conversation_ids, memory_ids),
    ).fetchall()


def summaries_covering(conn: Connection, anima_id: str, days: list[date]) -> list[dict]:
    """Summaries (any level) whose period holds one of these days."""
    return conn.execute(
        """SELECT DISTINCT t.id, t.level, t.period_start, t.period_end FROM temporal_summary t
           JOIN unnest(%s::date[]) AS d(day) ON d.day BETWEEN t.period_start AND t.period_end
           WHERE t.anima_id = %s ORDER BY t.period_start, t.id""",
        (days, anima_id),
    ).fetchall()


def dreams_of(conn: Connection, anima_id: str, days: list[date]) -> list[dict]:
    return conn.execute(
        "SELECT id, day FROM dream_journal WHERE anima_id = %s AND day = ANY(%s) ORDER BY day",
        (anima_id, days),
    ).fetchall()


def self_versions_since(conn: Connection, anima_id: str, day: date) -> dict[str, int]:
    """Per self block, the first version written by a night on or after `day` (those may
    draw on that day's conversations)."""
    rows = conn.execute(
        """SELECT memory_id AS name, min((after->>'version')::int) AS version FROM memory_event
           WHERE anima_id = %s AND table_name = 'self_block' AND day >= %s AND after ? 'version'
           GROUP BY memory_id""",
        (anima_id, day),
    ).fetchall()
    return {r["name"]: int(r["version"]) for r in rows}


def last_slept_day(conn: Connection, anima_id: str) -> date | None:
    row = conn.execute(
        "SELECT max(day) AS day FROM sleep_state WHERE anima_id = %s AND status = 'done'", (anima_id,)
    ).fetchone()
    return row["day"] if row else None


def erased(conn: Connection, anima_id: str, table: str, row_id: Any) -> datetime | None:
    """When a row of this anima was erased by a purge (its scrubbed events, or the purge's
    tombstone listing it, say so), or None."""
    row = conn.execute(
        """SELECT max(at) AS at FROM (
               SELECT erased_at AS at FROM memory_event
               WHERE table_name = %(table)s AND memory_id = %(id)s AND anima_id = %(anima)s AND erased_at IS NOT NULL
               UNION ALL
               SELECT created_at FROM memory_event
               WHERE table_name = 'forget' AND anima_id = %(anima)s AND op = 'purge'
                 AND after->'ids'->%(table)s @> to_jsonb(%(id)s::text)) t""",
        {"table": table, "id": str(row_id), "anima": anima_id},
    ).fetchone()
    return row["at"] if row else None


_OWNER = {
    "conversation": ("conversation", "id", "%s"),
    "message": ("message", "id", "%s::bigint"),
    "memory": ("semantic_memory", "id", "%s::bigint"),
}


def owners(conn: Connection, kind: str, target_id: str) -> list[str]:
    """The animas that have (or had, before a purge) this conversation, message or memory id."""
    table, col, cast = _OWNER[kind]
    if cast != "%s":  # m-N / f-N as shown, or the bare number
        target_id = target_id.removeprefix("m-" if kind == "message" else "f-")
        if not target_id.isdecimal():
            return []
    rows = conn.execute(
        f"""SELECT anima_id FROM {table} WHERE {col} = {cast}
            UNION SELECT anima_id FROM memory_event WHERE table_name = %s AND memory_id = %s AND erased_at IS NOT NULL
            UNION SELECT anima_id FROM memory_event
                  WHERE table_name = 'forget' AND op = 'purge' AND after->'ids'->%s @> to_jsonb(%s::text)
            ORDER BY 1""",
        (target_id, table, target_id, table, target_id),
    ).fetchall()
    return [r["anima_id"] for r in rows]


def conversations_ending(conn: Connection, tail: str, limit: int = 5) -> list[str]:
    """Conversation ids that end with `tail` but are not it (a file's id under its anima's
    prefix, `aria:2026-11-18-a` for `2026-11-18-a`): what `anima forget` suggests."""
    rows = conn.execute(
        "SELECT id FROM conversation WHERE right(id, length(%s)) = %s AND id <> %s ORDER BY id LIMIT %s",
        (tail, tail, tail, limit),
    ).fetchall()
    return [r["id"] for r in rows]


def counts(conn: Connection, anima_id: str) -> dict[str, int]:
    """Rows of the anima per table (what a purge of the anima will erase)."""
    out = {}
    for table in (*ANIMA_TABLES, "memory_event"):
        out[table] = int(
            one(conn.execute(f"SELECT count(*) AS n FROM {table} WHERE anima_id = %s", (anima_id,)))["n"]
        )
    return out


# ---- writes --------------------------------------------------------------------------------


def hide_messages(conn: Connection, anima_id: str, ids: list[int]) -> int:
    """A soft forget: the messages stay, out of recall and the nights."""
    return conn.execute(
        "UPDATE message SET forgotten_at = now() WHERE anima_id = %s AND id = ANY(%s) AND forgotten_at IS NULL",
        (anima_id, ids),
    ).rowcount


def mark_stale(conn: Connection, anima_id: str, pairs: list[tuple[date, str]]) -> None:
    """Drop the sleep_state rows of these (day, step) pairs, so the next night recomputes them."""
    conn.execute(
        """DELETE FROM sleep_state s USING unnest(%s::date[], %s::text[]) AS p(day, step)
           WHERE s.anima_id = %s AND s.day = p.day AND s.step = p.step""",
        ([p[0] for p in pairs], [p[1] for p in pairs], anima_id),
    )


def deprecate_anchors(conn: Connection, ids: list[int]) -> list[dict]:
    return conn.execute(
        "UPDATE emotional_anchor SET status = 'deprecated' WHERE id = ANY(%s) AND status = 'active' RETURNING *",
        (ids,),
    ).fetchall()


def take_rows(conn: Connection, table: str, ids: list[int]) -> list[dict]:
    """Delete rows by id, returning them (a soft forget audits what it deleted)."""
    return conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s) RETURNING *", (ids,)).fetchall()


def delete_rows(conn: Connection, table: str, ids: list[int]) -> int:
    return conn.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", (ids,)).rowcount


def drop_session_summaries(
    conn: Connection, anima_id: str, conversation_ids: list[str], from_message: int | None = None
) -> int:
    """The rolling summaries of these conversations (recall/session_view.py), or those covering
    `from_message` and after: they hold the messages' text; the next turn summarizes again."""
    return conn.execute(
        """DELETE FROM session_summary WHERE anima_id = %s AND conversation_id = ANY(%s)
             AND (%s::bigint IS NULL OR watermark >= %s::bigint)""",
        (anima_id, conversation_ids, from_message, from_message),
    ).rowcount


def delete_conversations(conn: Connection, anima_id: str, ids: list[str]) -> int:
    """Conversations and (ON DELETE CASCADE) their messages and those messages' citations."""
    return conn.execute(
        "DELETE FROM conversation WHERE anima_id = %s AND id = ANY(%s)", (anima_id, ids)
    ).rowcount


def repoint_references(conn: Connection, erased_ids: list[int]) -> tuple[int, int]:
    """Citations of erased memories move to the memory that superseded them when it stays
    (the chain followed to its first survivor), else go: (re-pointed, deleted)."""
    moved = conn.execute(
        """WITH RECURSIVE chain AS (
               SELECT id AS start, superseded_by AS next, 1 AS depth FROM semantic_memory WHERE id = ANY(%(ids)s)
               UNION ALL
               SELECT c.start, s.superseded_by, c.depth + 1 FROM chain c JOIN semantic_memory s ON s.id = c.next
               WHERE c.next = ANY(%(ids)s) AND c.depth < 100),
           target AS (SELECT DISTINCT ON (start) start, next FROM chain
                      WHERE next IS NOT NULL AND NOT (next = ANY(%(ids)s)) ORDER BY start, depth)
           UPDATE memory_reference r SET memory_id = t.next FROM target t
           WHERE r.memory_id = t.start
             AND NOT EXISTS (SELECT 1 FROM memory_reference o WHERE o.message_id = r.message_id
                             AND o.cited_memory_id = r.cited_memory_id AND o.id <> r.id AND o.memory_id = t.next)""",
        {"ids": erased_ids},
    ).rowcount
    gone = conn.execute("DELETE FROM memory_reference WHERE memory_id = ANY(%s)", (erased_ids,)).rowcount
    return moved, gone


def unlink_successors(conn: Connection, erased_ids: list[int]) -> int:
    """Memories that stay but were superseded by an erased one lose the pointer (its FK)."""
    return conn.execute(
        "UPDATE semantic_memory SET superseded_by = NULL WHERE superseded_by = ANY(%s) AND NOT (id = ANY(%s))",
        (erased_ids, erased_ids),
    ).rowcount


def scrub_events(conn: Connection, anima_id: str, table: str, ids: Iterable[Any]) -> int:
    """The before/after of every event of these rows go; ids, op and time stay (the tombstone)."""
    keys = [str(i) for i in ids]
    if not keys:
        return 0
    return conn.execute(
        """UPDATE memory_event SET before = NULL, after = NULL, erased_at = now()
           WHERE table_name = %s AND memory_id = ANY(%s) AND anima_id = %s
             AND (before IS NOT NULL OR after IS NOT NULL OR erased_at IS NULL)""",
        (table, keys, anima_id),
    ).rowcount


def scrub_memory_versions(
    conn: Connection, anima_id: str, memory_ids: list[int], conversation_ids: list[str]
) -> int:
    """Events of memories that stay, in the versions that cited these conversations (what the
    forgotten conversation made of them): scrubbed, so no revert restores those versions."""
    if not memory_ids:
        return 0
    return conn.execute(
        """UPDATE memory_event SET before = NULL, after = NULL, erased_at = now()
           WHERE table_name = 'semantic_memory' AND memory_id = ANY(%s) AND anima_id = %s
             AND (coalesce(before->'source_sessions', '[]') ?| %s OR coalesce(after->'source_sessions', '[]') ?| %s)""",
        ([str(i) for i in memory_ids], anima_id, conversation_ids, conversation_ids),
    ).rowcount


def scrub_self_versions(conn: Connection, anima_id: str, since: dict[str, int]) -> tuple[int, int]:
    """Self block versions from `since[name]` on: their history rows and events go, the block
    returns to the last version before (empty when none). (history rows, events) scrubbed."""
    history = events = 0
    for name, version in since.items():
        clean = conn.execute(
            """SELECT content FROM self_block_history WHERE anima_id = %s AND name = %s AND version < %s
               ORDER BY version DESC LIMIT 1""",
            (anima_id, name, version),
        ).fetchone()
        history += conn.execute(
            "DELETE FROM self_block_history WHERE anima_id = %s AND name = %s AND version >= %s",
            (anima_id, name, version),
        ).rowcount
        conn.execute(
            """UPDATE self_block SET content = %s, version = version + 1, updated_by = 'forget', updated_at = now()
               WHERE anima_id = %s AND name = %s""",
            (clean["content"] if clean else "", anima_id, name),
        )
        events += conn.execute(
            """UPDATE memory_event SET before = NULL, after = NULL, erased_at = now()
               WHERE anima_id = %s AND table_name = 'self_block' AND memory_id = %s
                 AND (coalesce((after->>'version')::int, 0) >= %s OR coalesce((before->>'version')::int, 0) >= %s)""",
            (anima_id, name, version, version),
        ).rowcount
    return history, events


def prune_recall_words(conn: Connection, anima_id: str, erased_texts: Iterable[str]) -> int:
    """Words of erased text that no remaining message or memory of the anima holds leave
    recall_word (a purged name must not come back as a spelling suggestion)."""
    words = sorted({w for t in erased_texts for w in _WORD.findall(t.lower()) if 4 <= len(w) <= 30})
    if not words:
        return 0
    # a stop word has no query (numnode 0): it stays, as everywhere in the language
    return conn.execute(
        """DELETE FROM recall_word w WHERE w.anima_id = %(anima)s AND w.word = ANY(%(words)s)
             AND numnode(to_tsquery('english', w.word)) > 0
             AND NOT EXISTS (SELECT 1 FROM message m WHERE m.anima_id = %(anima)s
                             AND m.fts @@ to_tsquery('english', w.word))
             AND NOT EXISTS (SELECT 1 FROM semantic_memory s WHERE s.anima_id = %(anima)s
                             AND s.fts @@ to_tsquery('english', w.word))""",
        {"anima": anima_id, "words": words},
    ).rowcount


def purge_anima(conn: Connection, anima_id: str) -> dict[str, int]:
    """Every row of the anima, table by table (children first), and its whole audit log."""
    out: dict[str, int] = {}
    # superseded_by points inside the anima: one statement deletes all its memories at once
    for table in ANIMA_TABLES:
        out[table] = conn.execute(f"DELETE FROM {table} WHERE anima_id = %s", (anima_id,)).rowcount
    if one(conn.execute("SELECT to_regclass('embedding') IS NOT NULL AS ok"))["ok"]:  # pgvector only
        out["embedding"] = conn.execute("DELETE FROM embedding WHERE anima_id = %s", (anima_id,)).rowcount
    out["memory_event"] = conn.execute("DELETE FROM memory_event WHERE anima_id = %s", (anima_id,)).rowcount
    out["api_key"] = conn.execute(
        "UPDATE api_key SET revoked_at = now() WHERE anima_id = %s AND revoked_at IS NULL", (anima_id,)
    ).rowcount
    return out


def vacuum_full(url: str, tables: Iterable[str]) -> list[str]:
    """VACUUM FULL ANALYZE these tables (those a purge touched): the data files are rewritten,
    so the deleted rows' bytes leave the disk (plain VACUUM only marks their space reusable),
    and the planner's statistics match the store again (autovacuum may be off). Takes each
    table's exclusive lock while it runs. Returns the tables vacuumed."""
    known = [t for t in dict.fromkeys(tables) if t in catalog.names()]
    with psycopg.connect(url, autocommit=True) as conn:
        for table in known:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
            if row and row[0]:
                conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
    return known


def tombstone(
    conn: Connection, anima_id: str, target: str, op: str, run_id: str, day: date | None, after: dict
) -> None:
    """The one event a forget leaves: what was asked, by whom, when, and the ids (no content)."""
    conn.execute(
        """INSERT INTO memory_event (anima_id, table_name, memory_id, op, before, after, run_id, day, step)
           VALUES (%s, 'forget', %s, %s, NULL, %s, %s, %s, 'forget')""",
        (anima_id, target, op, Jsonb(after), run_id, day),
    )


# ---- what later days derived (memory/quotes.py decides what quotes) --------------------------


def _strings(column: str) -> str:
    """Every string inside the column's value (text, JSON, an array), joined by spaces: what a
    quote is looked for in (JSON's own escapes would split a quoted run)."""
    return (
        f"(SELECT string_agg(v #>> '{{}}', ' ') FROM jsonb_path_query(to_jsonb({column}), "
        "'strict $.** ? (@.type() == \"string\")') v)"
    )


def learnt_rows(conn: Connection, anima_id: str, table: str, columns: tuple[str, ...]) -> list[dict]:
    """The anima's rows of `table` (one of store/catalog.py's learnt places), whole, each with
    `_text`: the strings of `columns`."""
    if table not in catalog.learnt_columns():
        raise InternalError(f"learnt_rows: {table!r} is not a catalogued learnt place")
    text = " || ' ' || ".join(f"coalesce({_strings(c)}, '')" for c in columns)
    return conn.execute(
        f"SELECT t.*, {text} AS _text FROM {table} t WHERE t.anima_id = %s", (anima_id,)
    ).fetchall()


def unheld_words(conn: Connection, anima_id: str, words: Iterable[str], *, soft: bool) -> list[str]:
    """Of `words` (lower-case), those no remaining message or memory of the anima holds (a
    soft forget: no message still shown, no active memory): what only the forgotten text said."""
    wanted = sorted({w for w in words if 4 <= len(w) <= 30 and _WORD.fullmatch(w)})
    if not wanted:
        return []
    rows = conn.execute(
        """SELECT w FROM unnest(%(words)s::text[]) AS w
           WHERE numnode(to_tsquery('english', w)) > 0
             AND NOT EXISTS (SELECT 1 FROM message m WHERE m.anima_id = %(anima)s
                             AND (NOT %(soft)s OR m.forgotten_at IS NULL) AND m.fts @@ to_tsquery('english', w))
             AND NOT EXISTS (SELECT 1 FROM semantic_memory s WHERE s.anima_id = %(anima)s
                             AND (NOT %(soft)s OR s.status = 'active') AND s.fts @@ to_tsquery('english', w))
           ORDER BY 1""",
        {"anima": anima_id, "words": wanted, "soft": soft},
    ).fetchall()
    return [r["w"] for r in rows]


def words_of(texts: Iterable[str]) -> set[str]:
    return {w for t in texts for w in _WORD.findall(t.lower()) if 4 <= len(w) <= 30}


def event_texts(conn: Connection, anima_id: str) -> Iterable[dict]:
    """The anima's audit events that still hold a before or after: id and the strings of both
    (read in batches, on a cursor of the caller's transaction)."""
    with conn.cursor(name="forget_event_scan") as cur:
        cur.itersize = 2000
        cur.execute(
            f"""SELECT id, coalesce({_strings("before")}, '') || ' ' || coalesce({_strings("after")}, '') AS text
                FROM memory_event WHERE anima_id = %s AND (before IS NOT NULL OR after IS NOT NULL)""",
            (anima_id,),
        )
        yield from cur


def scrub_event_ids(conn: Connection, ids: list[int]) -> int:
    """Scrub these audit events (before/after emptied, erased_at set)."""
    if not ids:
        return 0
    return conn.execute(
        "UPDATE memory_event SET before = NULL, after = NULL, erased_at = now() WHERE id = ANY(%s)", (ids,)
    ).rowcount


def self_history(conn: Connection, anima_id: str) -> list[dict]:
    """The anima's self block versions: name, version, content."""
    return conn.execute(
        "SELECT name, version, content FROM self_block_history WHERE anima_id = %s ORDER BY name, version",
        (anima_id,),
    ).fetchall()


def delete_session_summaries(conn: Connection, anima_id: str, keys: list[tuple[str, int]]) -> int:
    if not keys:
        return 0
    return conn.execute(
        """DELETE FROM session_summary s USING unnest(%s::text[], %s::bigint[]) AS k(conv, mark)
           WHERE s.anima_id = %s AND s.conversation_id = k.conv AND s.watermark = k.mark""",
        ([k[0] for k in keys], [k[1] for k in keys], anima_id),
    ).rowcount


def set_step_stats(conn: Connection, anima_id: str, rows: list[tuple[Any, str, dict, str | None]]) -> int:
    """Write back sleep_state rows (day, step, stats, error) of the anima: their quoting words
    scrubbed."""
    n = 0
    for day, step, stats, error in rows:
        n += conn.execute(
            "UPDATE sleep_state SET stats = %s, error = %s WHERE anima_id = %s AND day = %s AND step = %s",
            (Jsonb(stats), error, anima_id, day, step),
        ).rowcount
    return n

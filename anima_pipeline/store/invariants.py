"""The queries behind the night's asset checks (defs/night/checks.py, through
defs/night/memory_invariants.py): each returns the violations it finds (empty = the invariant holds), as
plain rows the checks turn into metadata.

Everything is parameterized. `animas` None means every anima, else only these (the animas a
run touched). The timezone is the partitions' one, so "the conversations of day D" means the
same as in the steps.
"""

from __future__ import annotations

import re
from datetime import date

from anima_pipeline.core.errors import InternalError
from anima_pipeline.store.db import Connection
from anima_pipeline.text.similarity import CJK_GAP_PATTERN, FOLD_PATTERN

_SQL_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?$")


def normalized_content_sql(column: str = "content") -> str:
    """`normalize_content` (text/similarity.py) as a PostgreSQL expression over `column` (an
    identifier, optionally qualified, e.g. `m.content`), from the same patterns.

    Needs a UTF8 database (for `normalize`) and `standard_conforming_strings=on` (the
    default since 9.1) so the `\\u` escapes reach the regex engine untouched. `lower()`
    follows the column's collation: ASCII and CJK agree everywhere; other scripts only
    agree under a non-C collation (e.g. C.UTF-8, en_US.UTF-8).
    """
    if not _SQL_IDENTIFIER_RE.match(column):
        raise InternalError(f"normalized_content_sql: {column!r} is not a plain column identifier")
    # The patterns contain no quote or percent sign (both are escaped as \uXXXX), so they
    # are safe inside a SQL literal and inside a psycopg query with %s placeholders.
    assert "'" not in FOLD_PATTERN + CJK_GAP_PATTERN and "%" not in FOLD_PATTERN + CJK_GAP_PATTERN
    return (
        "btrim(regexp_replace(regexp_replace("
        f"lower(normalize({column}, NFKC)), '{FOLD_PATTERN}', ' ', 'g'), "
        f"'{CJK_GAP_PATTERN}', '', 'g'), ' ')"
    )


NORMALIZED_CONTENT_SQL = normalized_content_sql("content")

# The conversations of (anima, day): those with a message in the day's window, and those
# cleanup deleted later whose recorded messages fall in it.
_DAY_CONVERSATIONS = """
    days AS (SELECT DISTINCT anima_id, day FROM ev),
    windows AS (
        SELECT anima_id, day, (day::timestamp AT TIME ZONE %(tz)s) AS t0,
               ((day + 1)::timestamp AT TIME ZONE %(tz)s) AS t1
        FROM days
    ),
    day_conv AS (
        SELECT w.anima_id, w.day, m.conversation_id AS cid
        FROM windows w JOIN message m
          ON m.anima_id = w.anima_id AND m.created_at >= w.t0 AND m.created_at < w.t1
        UNION
        SELECT w.anima_id, w.day, e.memory_id
        FROM windows w JOIN memory_event e
          ON e.anima_id = w.anima_id AND e.table_name = 'conversation' AND e.op = 'delete'
        WHERE EXISTS (
            SELECT 1 FROM jsonb_array_elements(COALESCE(e.before -> 'messages', '[]'::jsonb)) msg
            WHERE (msg ->> 'created_at')::timestamptz >= w.t0 AND (msg ->> 'created_at')::timestamptz < w.t1
        )
    ),
    conv_sets AS (
        SELECT d.anima_id, d.day, COALESCE(array_agg(DISTINCT c.cid) FILTER (WHERE c.cid IS NOT NULL), '{}') AS convs
        FROM days d LEFT JOIN day_conv c ON c.anima_id = d.anima_id AND c.day = d.day
        GROUP BY d.anima_id, d.day
    )
"""


_ANIMA_FILTER = "(%(animas)s::text[] IS NULL OR anima_id = ANY(%(animas)s))"


def _sources(col: str) -> str:
    return f"ARRAY(SELECT jsonb_array_elements_text(COALESCE({col} -> 'source_sessions', '[]'::jsonb)))"


def duplicate_active(conn: Connection, animas: list[str] | None) -> list[dict]:
    """Groups of active memories of one anima with the same normalized content: anima_id,
    normalized, ids (ascending); by anima, then smallest id."""
    return conn.execute(
        f"""SELECT anima_id, norm AS normalized, array_agg(id ORDER BY id) AS ids
            FROM (SELECT id, anima_id, {NORMALIZED_CONTENT_SQL} AS norm
                  FROM semantic_memory WHERE status = 'active' AND {_ANIMA_FILTER}) m
            GROUP BY anima_id, norm HAVING count(*) > 1
            ORDER BY anima_id, min(id)""",
        {"animas": animas},
    ).fetchall()


def bad_supersede_pointers(conn: Connection, animas: list[str] | None) -> list[dict]:
    """Memories whose superseded_by points at no memory or at another anima's, or that are
    active with a successor: id, anima_id, superseded_by, problem; by id."""
    return conn.execute(
        f"""SELECT m.id, m.anima_id, m.superseded_by,
                  CASE WHEN t.id IS NULL THEN 'points at a memory that does not exist'
                       WHEN t.anima_id <> m.anima_id THEN 'points at another anima''s memory'
                       WHEN m.status = 'active' THEN 'active memory has a successor'
                  END AS problem
           FROM semantic_memory m LEFT JOIN semantic_memory t ON t.id = m.superseded_by
           WHERE m.superseded_by IS NOT NULL AND {_ANIMA_FILTER.replace("anima_id", "m.anima_id")}
             AND (t.id IS NULL OR t.anima_id <> m.anima_id OR m.status = 'active')
           ORDER BY m.id""",
        {"animas": animas},
    ).fetchall()


def supersede_cycles(conn: Connection, animas: list[str] | None) -> list[dict]:
    """Memories whose superseded_by chain comes back to itself: id (where the walk started),
    anima_id, path (the ids walked); by id."""
    return conn.execute(
        f"""WITH RECURSIVE walk(start_id, anima_id, next_id, path, is_cycle) AS (
               SELECT id, anima_id, superseded_by, ARRAY[id], false
               FROM semantic_memory WHERE superseded_by IS NOT NULL AND {_ANIMA_FILTER}
               UNION ALL
               SELECT w.start_id, w.anima_id, m.superseded_by, w.path || m.id, m.id = ANY(w.path)
               FROM walk w JOIN semantic_memory m ON m.id = w.next_id
               WHERE NOT w.is_cycle
           )
           SELECT start_id AS id, anima_id, path FROM walk WHERE is_cycle ORDER BY start_id""",
        {"animas": animas},
    ).fetchall()


def animas_with_active_memories(conn: Connection, animas: list[str] | None) -> list[str]:
    """The animas (of `animas`) with at least one active semantic memory, by id."""
    return [
        r["anima_id"]
        for r in conn.execute(
            f"SELECT DISTINCT anima_id FROM semantic_memory WHERE status = 'active' AND {_ANIMA_FILTER} "
            "ORDER BY anima_id",
            {"animas": animas},
        ).fetchall()
    ]


def light_scope_violations(
    conn: Connection, steps: list[str], timezone: str, animas: list[str] | None, days: list[date] | None
) -> list[dict]:
    """The writes of the light-sleep `steps` (on `days`, None = every day) outside the step's
    scope, from memory_event, by event: event_id, anima_id, day, step, table_name, op,
    memory_id, problem. Out of scope: a table the step does not own; semantic memories
    created with sources outside the day's conversations, updated / deprecated when their
    sources did not meet the day's conversations, or given new sources from outside them;
    anchors on a conversation not of that day; a self block other than autobiography_summary."""
    return conn.execute(
        f"""WITH ev AS (
                SELECT id, anima_id, day, step, table_name, op, memory_id, before, after
                FROM memory_event WHERE step = ANY(%(steps)s) AND day IS NOT NULL AND {_ANIMA_FILTER}
                  AND erased_at IS NULL  -- scrubbed by a purge: nothing left to check
                  AND (%(days)s::date[] IS NULL OR day = ANY(%(days)s))
            ),
            {_DAY_CONVERSATIONS}
            SELECT * FROM (
                SELECT ev.id AS event_id, ev.anima_id, ev.day, ev.step, ev.table_name, ev.op, ev.memory_id,
                    CASE
                      WHEN NOT ((ev.step = 'semantic_memory/extracted' AND ev.table_name = 'semantic_memory')
                             OR (ev.step = 'emotional_anchors/marked' AND ev.table_name = 'emotional_anchor')
                             OR (ev.step = 'autobiographical_memory/narrated'
                                 AND ev.table_name = 'autobiographical_memory')
                             OR (ev.step = 'self_blocks/autobiography_summary' AND ev.table_name = 'self_block'))
                        THEN 'wrote ' || ev.table_name || ', which this step does not own'
                      WHEN ev.table_name = 'semantic_memory' AND ev.op NOT IN ('create', 'update', 'deprecate')
                        THEN 'op ' || ev.op || ' is not a light-sleep tool'
                      WHEN ev.table_name = 'semantic_memory' AND ev.op = 'create'
                           AND NOT ({_sources("ev.after")} <@ cs.convs)
                        THEN 'created with sources outside the day''s conversations'
                      WHEN ev.table_name = 'semantic_memory' AND ev.op IN ('update', 'deprecate')
                           AND NOT ({_sources("ev.before")} && cs.convs)
                        THEN 'changed a memory whose sources do not meet the day''s conversations'
                      WHEN ev.table_name = 'semantic_memory' AND ev.op = 'update'
                           AND NOT ({_sources("ev.after")} <@ ({_sources("ev.before")} || cs.convs))
                        THEN 'update added sources outside the day''s conversations'
                      WHEN ev.table_name = 'emotional_anchor' AND ev.op = 'create'
                           AND ev.after ->> 'conversation_id' IS NOT NULL
                           AND NOT (ev.after ->> 'conversation_id' = ANY(cs.convs))
                        THEN 'anchor on a conversation not of that day'
                      WHEN ev.table_name = 'self_block' AND ev.memory_id <> 'autobiography_summary'
                        THEN 'wrote self block ' || ev.memory_id
                    END AS problem
                FROM ev JOIN conv_sets cs ON cs.anima_id = ev.anima_id AND cs.day = ev.day
            ) v
            WHERE problem IS NOT NULL
            ORDER BY event_id""",
        {"steps": steps, "tz": timezone, "animas": animas, "days": days},
    ).fetchall()


def orphan_sources(conn: Connection, animas: list[str] | None) -> list[dict]:
    """Active memories citing a source conversation that neither exists nor was cleaned (a
    cleanup deletion is in memory_event and can be restored): id, anima_id, missing; by id."""
    return conn.execute(
        f"""SELECT m.id, m.anima_id, array_agg(s ORDER BY s) AS missing
           FROM semantic_memory m CROSS JOIN LATERAL unnest(m.source_sessions) AS s
           WHERE m.status = 'active' AND {_ANIMA_FILTER.replace("anima_id", "m.anima_id")}
             AND NOT EXISTS (SELECT 1 FROM conversation c WHERE c.anima_id = m.anima_id AND c.id = s)
             AND NOT EXISTS (SELECT 1 FROM memory_event e
                             WHERE e.anima_id = m.anima_id AND e.table_name = 'conversation'
                               AND e.op = 'delete' AND e.memory_id = s)
           GROUP BY m.id, m.anima_id
           ORDER BY m.id""",
        {"animas": animas},
    ).fetchall()

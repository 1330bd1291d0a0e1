"""Counts per anima and in total, for `anima status` and the Dagster metadata, and the
conversations the night's cleanup deleted (read by status, and by an import that must not
bring them back)."""

from __future__ import annotations

from collections.abc import Iterable

from anima_pipeline.store.db import Connection

STATUS_KEYS: tuple[str, ...] = (
    "conversations",
    "messages",
    "semantic_active",
    "semantic_deprecated",
    "emotional_anchors",
    "autobiographical_active",
    "temporal_summaries",
    "memory_references",
    "dream_entries",
)

# each statement's `{only}` is empty, or narrows it to one anima (read through the anima indexes)
_QUERIES: dict[str, str] = {
    # a soft forget hides messages (`forgotten_at`, docs/forget.md): they are not counted, and
    # neither is a conversation whose every message is hidden (hidden_by_forget counts them)
    "conversations": """SELECT c.anima_id, count(*) FROM conversation c
        WHERE (EXISTS (SELECT 1 FROM message m WHERE m.anima_id = c.anima_id
                       AND m.conversation_id = c.id AND m.forgotten_at IS NULL)
               OR NOT EXISTS (SELECT 1 FROM message m WHERE m.anima_id = c.anima_id
                              AND m.conversation_id = c.id)) {only}
        GROUP BY c.anima_id""",
    "messages": "SELECT anima_id, count(*) FROM message WHERE forgotten_at IS NULL {only} GROUP BY anima_id",
    "semantic_active": (
        "SELECT anima_id, count(*) FROM semantic_memory WHERE status = 'active' {only} GROUP BY anima_id"
    ),
    "semantic_deprecated": (
        "SELECT anima_id, count(*) FROM semantic_memory WHERE status = 'deprecated' {only} GROUP BY anima_id"
    ),
    "emotional_anchors": (
        "SELECT anima_id, count(*) FROM emotional_anchor WHERE status = 'active' {only} GROUP BY anima_id"
    ),
    "autobiographical_active": (
        "SELECT anima_id, count(*) FROM autobiographical_memory WHERE status = 'active' {only} GROUP BY anima_id"
    ),
    "temporal_summaries": "SELECT anima_id, count(*) FROM temporal_summary WHERE true {only} GROUP BY anima_id",
    "memory_references": "SELECT anima_id, count(*) FROM memory_reference WHERE true {only} GROUP BY anima_id",
    "dream_entries": "SELECT anima_id, count(*) FROM dream_journal WHERE true {only} GROUP BY anima_id",
}


def status(conn: Connection, anima_id: str | None = None) -> dict:
    """{"totals": {key: n}, "animas": [{"anima_id": a, key: n, ...}]} with exactly STATUS_KEYS;
    with `anima_id`, that anima only (its rows are read through the anima indexes)."""
    per: dict[str, dict[str, int]] = {}
    if anima_id is not None:
        per[anima_id] = dict.fromkeys(STATUS_KEYS, 0)
    for key, sql in _QUERIES.items():
        column = "c.anima_id" if key == "conversations" else "anima_id"
        only = "" if anima_id is None else f"AND {column} = %(anima)s"
        for row in conn.execute(sql.format(only=only), {"anima": anima_id}).fetchall():
            anima, n = row["anima_id"], row["count"]
            per.setdefault(anima, dict.fromkeys(STATUS_KEYS, 0))[key] = int(n)
    totals = {k: sum(a[k] for a in per.values()) for k in STATUS_KEYS}
    return {"totals": totals, "animas": [{"anima_id": a, **per[a]} for a in sorted(per)]}


def hidden_by_forget(conn: Connection) -> dict[str, int]:
    """Messages per anima a soft forget hid (`forgotten_at`): what `status` no longer counts
    (a purge deletes them; `anima revert --run` of the forget shows them again)."""
    rows = conn.execute(
        "SELECT anima_id, count(*) FROM message WHERE forgotten_at IS NOT NULL GROUP BY anima_id"
    ).fetchall()
    return {r["anima_id"]: int(r["count"]) for r in rows}


def cleaned_by_night(conn: Connection) -> dict[str, int]:
    """Conversations per anima that the night's cleanup deleted (and nobody restored): what an
    import counted and `status` no longer does."""
    counts: dict[str, int] = {}
    for anima_id, _conversation in cleaned_conversations(conn):
        counts[anima_id] = counts.get(anima_id, 0) + 1
    return counts


def cleaned_conversations(
    conn: Connection, among: Iterable[tuple[str, str]] | None = None
) -> set[tuple[str, str]]:
    """(anima, conversation) pairs the cleanup deleted and nobody restored since: a re-import
    of the same archive must not bring them back (import stays idempotent across nights).
    `among` narrows the read to those pairs (an append of a few messages reads a few events)."""
    sql = """SELECT anima_id, memory_id, op FROM memory_event
             WHERE table_name = 'conversation' AND op IN ('delete', 'restore')"""
    params: tuple = ()
    if among is not None:
        pairs = sorted(set(among))
        sql += " AND memory_id = ANY(%s) AND anima_id = ANY(%s)"
        params = ([c for _, c in pairs], sorted({a for a, _ in pairs}))
    state: dict[tuple[str, str], str] = {}
    for row in conn.execute(sql + " ORDER BY id", params).fetchall():
        state[(row["anima_id"], row["memory_id"])] = row["op"]
    return {key for key, op in state.items() if op == "delete"}


def recent_nights(conn: Connection, anima_id: str, limit: int = 7) -> list[dict]:
    """The anima's latest `limit` days with steps, newest first: per day how many steps are
    done, failed and running."""
    return conn.execute(
        """SELECT day, count(*) FILTER (WHERE status = 'done') AS done,
                  count(*) FILTER (WHERE status = 'failed') AS failed,
                  count(*) FILTER (WHERE status = 'running') AS running
           FROM sleep_state WHERE anima_id = %s GROUP BY day ORDER BY day DESC LIMIT %s""",
        (anima_id, limit),
    ).fetchall()


def night_costs(conn: Connection, limit: int = 7) -> list[dict]:
    """The latest `limit` nights with steps, newest first: day, animas that talked that day
    (light sleep ran for them: an anima-night), the model calls and dollars the steps
    recorded (`anima status`'s nights table; docs/cost.md)."""
    return conn.execute(
        """SELECT day,
                  count(DISTINCT anima_id) FILTER (WHERE step = 'semantic_memory/extracted') AS animas,
                  coalesce(sum((stats->>'llm_calls')::numeric), 0)::int AS llm_calls,
                  coalesce(sum((stats->>'cost_usd')::numeric), 0)::float AS cost_usd
           FROM sleep_state GROUP BY day ORDER BY day DESC LIMIT %s""",
        (limit,),
    ).fetchall()

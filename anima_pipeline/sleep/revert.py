"""`anima revert --run RUN_ID`: undo what one run wrote, by replaying its memory_event rows
backwards. Nothing is deleted that held knowledge: a memory, anchor or narrative the run
created is deprecated ("reverted run …"), a changed memory gets its `before` back, a
conversation the cleanup deleted is restored from the event. Summaries and dream entries
(derived, one per period) return to their previous text, or go when the run made them.
The run's sleep_state rows go too, so its nights can run again. Every undo is itself
audited under the revert's own run id, so reverting the revert restores memories, anchors,
narratives, self blocks and conversations; a summary or dream entry the revert removed comes
back by running its night again.
"""

from __future__ import annotations

from collections import Counter

from psycopg.types.json import Jsonb

from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import WRITABLE, MemoryRepo

REVERTED_REASON = "reverted run"  # prefix of deprecated_reason; light sleep may learn these facts again


class RevertError(ValueError):
    pass


def revert_run(conn: Connection, run_id: str, revert_run_id: str) -> Counter[str]:
    events = conn.execute(
        "SELECT * FROM memory_event WHERE run_id = %s ORDER BY id DESC", (run_id,)
    ).fetchall()
    if not events:
        raise RevertError(f"run {run_id!r} wrote nothing that memory_event knows of")
    stats: Counter[str] = Counter()
    for e in events:
        audit = Audit(conn=conn, anima_id=e["anima_id"], run_id=revert_run_id, step="revert", day=e["day"])
        stats[_undo(conn, e, audit, run_id)] += 1
    stats["sleep_state_cleared"] = conn.execute(
        "DELETE FROM sleep_state WHERE run_id = %s", (run_id,)
    ).rowcount
    return stats


def _undo(conn: Connection, e: dict, audit: Audit, run_id: str) -> str:
    table, before, after = e["table_name"], e["before"], e["after"]
    reason = f"{REVERTED_REASON} {run_id}"
    if table == "semantic_memory":
        repo = MemoryRepo(conn, audit)
        mid = int(e["memory_id"])
        current = repo.get(mid)
        if current is None:
            return "skipped_missing"
        if before is None:
            if current.status == "deprecated":
                return "already_deprecated"
            repo.deprecate(mid, reason, op="revert")
            return "memories_deprecated"
        changes = {k: before.get(k) for k in WRITABLE if k in before}
        repo.update(mid, changes, op="revert")
        return "memories_restored"
    if table in ("emotional_anchor", "autobiographical_memory"):
        status = "deprecated" if before is None else before.get("status", "active")
        extra = ", deprecated_reason = %s" if table == "autobiographical_memory" else ""
        params = (status, reason, e["memory_id"]) if extra else (status, e["memory_id"])
        row = conn.execute(
            f"UPDATE {table} SET status = %s{extra} WHERE id = %s RETURNING *", params
        ).fetchone()
        audit.record(table, e["memory_id"], "revert", after, row)
        return f"{table}_reverted"
    if table == "self_block":
        SelfBlockRepo(conn, audit).write(
            e["anima_id"], e["memory_id"], (before or {}).get("content", ""), "revert"
        )
        return "self_blocks_restored"
    if table in ("temporal_summary", "dream_journal"):
        if before is None:
            conn.execute(f"DELETE FROM {table} WHERE id = %s", (int(e["memory_id"]),))
        else:
            cols = [k for k in before if k not in ("id", "anima_id", "created_at")]
            sets = ", ".join(f"{c} = %s" for c in cols)
            values = [Jsonb(before[c]) if isinstance(before[c], (dict, list)) else before[c] for c in cols]
            conn.execute(f"UPDATE {table} SET {sets} WHERE id = %s", [*values, int(e["memory_id"])])
        audit.record(table, e["memory_id"], "revert", after, before)
        return f"{table}_restored"
    if table == "conversation" and e["op"] == "delete":
        from anima_pipeline.sleep.cleanup import restore_conversation

        exists = conn.execute(
            "SELECT 1 FROM conversation WHERE anima_id = %s AND id = %s", (e["anima_id"], e["memory_id"])
        ).fetchone()
        if exists:
            return "already_restored"
        restore_conversation(conn, e["id"], audit)
        return "conversations_restored"
    return f"skipped_{table}_{e['op']}"  # bookkeeping (imports, citations) the next night recomputes

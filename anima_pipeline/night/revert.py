"""`anima revert --run RUN_ID`: undo what one run wrote, by replaying its memory_event rows
backwards. Nothing is deleted that held knowledge: a memory, anchor or narrative the run
created is deprecated ("reverted run …"), a changed memory gets its `before` back, a
conversation the cleanup deleted is restored from the event. Summaries and dream entries
(derived, one per period) return to their previous text, or go when the run made them.
The run's sleep_state rows go too, so its nights can run again. Every undo is itself
audited under the revert's own run id, so reverting the revert restores memories, anchors,
narratives, self blocks and conversations; a summary or dream entry the revert removed comes
back by running its night again.

Two rules keep a revert from destroying newer state (docs/guards.md):
- a run is reverted once: the revert leaves a marker event (table 'run', op 'revert') and a
  second revert of the same run is refused naming the first;
- a row (a memory, a self block, a summary, ...) that a later run changed after this run is
  not rolled back over that change: the revert is refused naming the later runs, and with
  `force` it reverts only the rows no later run touched.
"""

from __future__ import annotations

from collections import Counter
from datetime import date

from anima_pipeline.core.errors import InputError
from anima_pipeline.store import sleep_state
from anima_pipeline.store import undo as store
from anima_pipeline.store.db import Connection, anima_lock
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import WRITABLE, MemoryRepo
from anima_pipeline.store.stale_conversations import conversation_exists, restore_conversation
from anima_pipeline.store.undo import REVERTED_REASON


class RevertError(InputError):
    pass


def _reverts_of(conn: Connection, run_id: str) -> list[dict]:
    """The revert markers of `run_id`: who reverted it, whole or for one (anima, day)."""
    return store.revert_markers(conn, run_id)


def _later_changes(conn: Connection, run_id: str, events: list[dict]) -> dict[tuple, set[str]]:
    """Rows of `events` that another run wrote after this run first wrote them: row -> run ids."""
    first: dict[tuple, int] = {}
    for e in events:
        key = (e["anima_id"], e["table_name"], e["memory_id"])
        first[key] = min(first.get(key, e["id"]), e["id"])
    if not first:
        return {}
    rows = store.later_writers(conn, run_id, first)
    out: dict[tuple, set[str]] = {}
    for r in rows:
        out.setdefault((r["anima_id"], r["table_name"], r["memory_id"]), set()).add(r["run_id"])
    return out


def revert_run(conn: Connection, run_id: str, revert_run_id: str, *, force: bool = False) -> Counter[str]:
    """Undo `run_id` as a whole. Refused (RevertError) when it was reverted before, or when later
    runs changed rows it wrote, unless `force`: then those rows are left as the later runs made them."""
    whole = [m for m in _reverts_of(conn, run_id) if m["anima_id"] == "" and m["day"] is None]
    if whole:
        first = whole[0]
        raise RevertError(
            f"run {run_id!r} was already reverted by {first['run_id']} at {first['created_at']:%Y-%m-%d %H:%M:%S %Z}; "
            f"a second revert would roll back newer state. To undo that revert, revert {first['run_id']}"
        )
    return revert_events(conn, run_id, revert_run_id, force=force)


def revert_events(
    conn: Connection,
    run_id: str,
    revert_run_id: str,
    *,
    anima_id: str | None = None,
    day: date | None = None,
    force: bool = False,
) -> Counter[str]:
    """Replay the events of `run_id` (only those of `anima_id` / `day` when given) backwards,
    audited under `revert_run_id`, then drop the matching sleep_state rows and leave a marker."""
    # under each anima's lock, taken before the events are read (in one order): a purge or a
    # night step of the same anima in flight ends first, and the events a purge scrubbed are
    # read as scrubbed, never written back (docs/forget.md, "Beside a running night")
    for anima in store.run_animas(conn, run_id, anima_id, day):
        anima_lock(conn, anima)
    scoped = [m for m in _reverts_of(conn, run_id) if m["anima_id"] and m["day"] is not None]
    done = {(m["anima_id"], m["day"]) for m in scoped}  # (anima, day) parts undone before
    events = [
        e for e in store.run_events(conn, run_id, anima_id, day) if (e["anima_id"], e["day"]) not in done
    ]
    if not events and anima_id is None:
        raise RevertError(f"run {run_id!r} wrote nothing that memory_event knows of")
    later = _later_changes(conn, run_id, events)
    if later and not force:
        runs = sorted({r for rs in later.values() for r in rs})
        sample = ", ".join(f"{t} {m}" for _, t, m in sorted(later)[:6]) + (", …" if len(later) > 6 else "")
        raise RevertError(
            f"run {run_id!r} cannot be reverted: later run(s) {', '.join(runs[:5])} changed {len(later)} of "
            f"the rows it wrote ({sample}); revert those first, or pass --force to revert only the rows "
            "no later run touched"
        )
    stats: Counter[str] = Counter()
    for e in events:
        if e["erased_at"] is not None:  # scrubbed by a purge: what it held is gone for good
            stats["skipped_erased"] += 1
            continue
        if (e["anima_id"], e["table_name"], e["memory_id"]) in later:
            stats["kept_newer_rows"] += 1
            continue
        audit = Audit(conn=conn, anima_id=e["anima_id"], run_id=revert_run_id, step="revert", day=e["day"])
        stats[_undo(conn, e, audit, run_id)] += 1
    # a scoped undo (the night guard's) keeps the anima's night row: the frame records that
    # night as failed, so the order guard holds the next day until it is re-run
    stats["sleep_state_cleared"] = store.clear_sleep_state(conn, run_id, anima_id, day, sleep_state.NIGHT)
    Audit(conn=conn, anima_id=anima_id or "", run_id=revert_run_id, step="revert", day=day).record(
        "run", run_id, "revert", None, {"revert_run": revert_run_id, "forced": force, **stats}
    )
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
    if table in store.STATUS_LAYERS:
        status = "deprecated" if before is None else before.get("status", "active")
        row = store.set_layer_status(conn, table, e["memory_id"], status, reason)
        audit.record(table, e["memory_id"], "revert", after, row)
        return f"{table}_reverted"
    if table == "self_block":
        SelfBlockRepo(conn, audit).write(
            e["anima_id"], e["memory_id"], (before or {}).get("content", ""), "revert"
        )
        return "self_blocks_restored"
    if table in store.DERIVED:
        if before is None:
            store.delete_derived(conn, table, int(e["memory_id"]))
        else:
            store.restore_derived(conn, table, int(e["memory_id"]), before)
        audit.record(table, e["memory_id"], "revert", after, before)
        return f"{table}_restored"
    if table == "message" and e["op"] == "hide":  # a soft forget: the messages come back
        store.unhide_messages(conn, e["anima_id"], after["ids"])
        audit.record("message", e["memory_id"], "revert", after, None)
        return "messages_unhidden"
    if table == "conversation" and e["op"] == "delete":
        if conversation_exists(conn, e["anima_id"], e["memory_id"]):
            return "already_restored"
        restore_conversation(conn, e["id"], audit)
        return "conversations_restored"
    return f"skipped_{table}_{e['op']}"  # bookkeeping (imports, citations) the next night recomputes

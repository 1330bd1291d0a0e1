"""Promote a shadow: make the live store know what the replay learnt, as ONE audited run
(`promote-…`), so that `anima revert --run promote-…` gives the live store back (docs/replay.md).

Nothing is deleted: a live memory the shadow does not hold is deprecated ("replaced by replay
N"), a memory only the shadow holds is created, one both hold that the replay changed gets the
shadow's content and status; the day, week, month and year summaries of the replayed days and
the self blocks take the shadow's text; narratives follow memories. The archive is the same in
both, so nothing of it moves.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import date, timedelta
from typing import Any

from anima_pipeline.replay import diff as diffing
from anima_pipeline.store import as_of as snapshot
from anima_pipeline.store import shadow_reads as queries
from anima_pipeline.store import shadows as shadow
from anima_pipeline.store.db import Connection, Database, anima_lock, connect
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import AutobiographyRepo, SelfBlockRepo, TemporalRepo
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.store.sleep_state import animas_with_conversations

PROMOTE_STEP = "replay/promote"
_COPIED = (
    "type",
    "content",
    "confidence",
    "source_sessions",
    "observed_at",
    "valid_from",
    "valid_until",
    "pinned",
    "pinned_at",
)


def promote(db: Database, name: str, who: str = "operator") -> tuple[str, Counter[str]]:
    """Apply shadow `name` to the live store; returns the promote run id and what it did."""
    meta = shadow.info(db.url, name)
    if meta.get("promoted_run"):
        raise shadow.ShadowError(
            f"shadow {name!r} was promoted already as {meta['promoted_run']}; revert that run to undo it"
        )
    if meta.get("status") != "replayed":
        raise shadow.ShadowError(
            f"shadow {name!r} has not been replayed (status {meta.get('status')!r}); run `anima replay` first"
        )
    first, last = (date.fromisoformat(meta[k]) for k in ("from", "to"))
    with connect(db.url) as live:
        check_base(live, name, meta, first, last)
    inherited = int(meta.get("live_max_memory_id", 0))  # ids up to this one both stores share
    url = shadow.shadow_url(db.url, name)
    d = diffing.diff(db.url, url, name, first, last)
    run_id = f"promote-{uuid.uuid4().hex[:12]}"
    stats: Counter[str] = Counter()
    with connect(url) as sh, db.transaction() as conn:
        animas = sorted(
            {m.anima_id for m in (*d.added, *d.removed, *d.changed)}.union(animas_with_conversations(sh))
        )
        for anima in animas:
            anima_lock(conn, anima)
        ids: dict[int, int] = {}  # shadow id -> live id of the memories created here

        def audit(anima: str) -> Audit:
            return Audit(conn=conn, anima_id=anima, run_id=run_id, step=PROMOTE_STEP, day=last)

        rows = queries.all_memories(sh)
        for m in d.added:
            r = rows[m.id]
            new = MemoryRepo(conn, audit(m.anima_id)).create(m.anima_id, {k: r[k] for k in _COPIED})
            ids[m.id] = new.id
            stats["memories_created"] += 1
        for m in d.changed:
            r = rows[m.id]
            changes: dict[str, Any] = {k: r[k] for k in ("type", "content", "status", "deprecated_reason")}
            successor = r["superseded_by"]
            changes["superseded_by"] = ids.get(
                successor, successor if successor and successor <= inherited else None
            )
            MemoryRepo(conn, audit(m.anima_id)).update(m.id, changes, op="promote")
            stats["memories_changed"] += 1
        for m in d.removed:
            MemoryRepo(conn, audit(m.anima_id)).deprecate(m.id, f"replaced by replay {name}", op="promote")
            stats["memories_deprecated"] += 1
        for anima in animas:
            stats += _layers(sh, conn, audit(anima), anima, first, last)
    shadow.set_info(db.url, name, {"status": "promoted", "promoted_run": run_id, "promoted_by": who})
    return run_id, stats


def check_base(live: Connection, name: str, meta: dict[str, Any], first: date, last: date) -> None:
    """Refuse a promote whose shadow no longer fits the live store (docs/replay.md): the live
    store as of the day before `first` cannot be rebuilt exactly (nights ran out of order
    since); it has written since the shadow was made; or it holds writes of days after
    `last`, which the shadow never saw and a promote would retire."""
    again = f"`anima replay --from {first} --to {{to}} --name {name} --replace`"
    snapshot.check_rebuildable(live, first - timedelta(days=1), last)
    moved = queries.state_days(live, snapshot.AUDITED, after_event=int(meta.get("live_max_event_id", 0)))
    if "live_max_event_id" in meta and moved:
        raise shadow.ShadowError(
            f"the live store changed since shadow {name!r} was made (writes of {', '.join(map(str, moved))}): "
            f"the shadow's base is not the live store's any more; replay again: {again.format(to=last)}"
        )
    later = queries.state_days(live, snapshot.AUDITED, after_day=last)
    if later:
        raise shadow.ShadowError(
            f"the live store holds writes of days after the replayed {first}..{last} "
            f"({', '.join(map(str, later))}) that shadow {name!r} never saw: a promote would retire them; "
            f"replay through {later[-1]}: {again.format(to=later[-1])}"
        )


def _layers(sh: Connection, conn: Any, audit: Audit, anima: str, first: date, last: date) -> Counter[str]:
    stats: Counter[str] = Counter()
    temporal = TemporalRepo(conn, audit)
    for s in queries.summaries_touching(sh, anima, first, last):
        live = temporal.get(anima, s["level"], s["period_start"])
        if live is None or live["content"] != s["content"]:
            temporal.upsert(
                anima, s["level"], s["period_start"], s["period_end"], s["content"], s["stats"] or {}
            )
            stats["summaries_replaced"] += 1
    blocks = SelfBlockRepo(conn, audit)
    current = blocks.all(anima)
    for b in queries.self_blocks(sh, anima):
        if current.get(b["name"]) != b["content"]:
            blocks.write(anima, b["name"], b["content"], PROMOTE_STEP)
            stats["self_blocks_replaced"] += 1
    narratives = AutobiographyRepo(conn, audit)
    live_titles = {(n["title"], n["narrative"]): n["id"] for n in narratives.active(anima)}
    shadow_rows = AutobiographyRepo(sh).active(anima)  # read-only: no audit
    wanted = {(n["title"], n["narrative"]) for n in shadow_rows}
    for n in shadow_rows:
        if (n["title"], n["narrative"]) not in live_titles:
            values = {
                k: n[k]
                for k in (
                    "title",
                    "narrative",
                    "significance",
                    "occurred_from",
                    "occurred_until",
                    "source_sessions",
                )
            }
            narratives.create(anima, {**values, "source_memory_ids": []})
            stats["narratives_created"] += 1
    for key, nid in live_titles.items():
        if key not in wanted:
            narratives.deprecate(nid, "replaced by replay")
            stats["narratives_deprecated"] += 1
    return stats

"""What the offline deep-sleep engine would do to a memory store: counts and samples to judge.

Run:  .venv/bin/python -m benchmarks.deep_sleep_actions ARCHIVE.jsonl [ARCHIVE.jsonl ...]
      .venv/bin/python -m benchmarks.deep_sleep_actions --from-store DATABASE_URL

Memories (one list of ``MemoryView`` per anima):

* By default the offline light-sleep heuristic ``extract_facts`` runs over each archive,
  one call per (anima, local day in the default ANIMA_TIMEZONE), as light sleep would see a night;
  each candidate becomes a memory observed at its ``observed_at`` (read-only use of
  light.py; nothing is written anywhere).
* With ``--from-store URL`` the active ``semantic_memory`` rows of each anima are read
  instead (read-only), e.g. after ``anima sleep`` ran through the real pipeline.

The rounds run in deep-sleep order over each anima's list, each on the output of the
previous one: 1. ``find_contradictions`` (losers leave the store), 2. ``split_parts`` (the
parts replace the memory), 3. exact twins by normalized content, then ``merge_groups``
(threshold 0.75, the default ``merge_threshold``). Printed: counts per kind, the share of
memories any round touched, the largest per-anima share per round (the breaker trips at
25 % of the active memories in one round), and a seeded random sample of up to ``--sample``
decisions of each kind with the texts involved, so a person can judge precision.

``--heuristics MODULE`` imports another copy of the heuristics as one module providing
``MemoryView``, ``find_contradictions``, ``split_parts``, ``normalize_content`` and
``merge_groups`` (e.g. a saved baseline on PYTHONPATH) to compare before/after on the same
extraction; by default they are the rounds' own modules under ``night/steps/deep/``.
"""

from __future__ import annotations

import argparse
import importlib
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from anima_pipeline.night.steps.deep.contradictions import find_contradictions
from anima_pipeline.night.steps.deep.memory_view import MemoryView
from anima_pipeline.night.steps.deep.merges import merge_groups
from anima_pipeline.night.steps.deep.splits import split_parts
from anima_pipeline.night.steps.light.facts import extract_facts
from anima_pipeline.text.similarity import normalize_content
from testkit.data import group_days, read_jsonl

MERGE_THRESHOLD = 0.75
BREAKER_RATIO = 0.25


# --- memories -----------------------------------------------------------------------


# the heuristics of the four rounds, as one namespace (`--heuristics` replaces it by a module)
OURS = SimpleNamespace(
    MemoryView=MemoryView,
    find_contradictions=find_contradictions,
    split_parts=split_parts,
    normalize_content=normalize_content,
    merge_groups=merge_groups,
)


def archive_views(paths: list[Path], deep: ModuleType | SimpleNamespace) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    next_id = 1
    for path in paths:
        for anima_id, days in sorted(group_days(read_jsonl(path)).items()):
            views = out.setdefault(anima_id, [])
            for _, utterances in sorted(days.items()):
                for fact in extract_facts(utterances):
                    views.append(
                        deep.MemoryView(
                            id=next_id,
                            type=fact.type,
                            content=fact.content,
                            confidence=fact.confidence,
                            source_sessions=(fact.conversation_id,),
                            observed_at=fact.observed_at,
                            updated_at=fact.observed_at,
                            pinned=False,
                            pinned_at=None,
                            reference_count=0.0,
                            last_referenced_at=None,
                        )
                    )
                    next_id += 1
    return out


def store_views(database_url: str, deep: ModuleType | SimpleNamespace) -> dict[str, list[Any]]:
    import psycopg  # only needed for this mode
    from psycopg.rows import dict_row

    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        rows = conn.execute(
            """SELECT anima_id, id, type, content, confidence, source_sessions, observed_at, updated_at,
                      pinned, pinned_at, reference_count, last_referenced_at
               FROM semantic_memory WHERE status = 'active' ORDER BY anima_id, id"""
        ).fetchall()
    out: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        out[r["anima_id"]].append(
            deep.MemoryView(
                id=r["id"],
                type=r["type"],
                content=r["content"],
                confidence=float(r["confidence"]),
                source_sessions=tuple(r["source_sessions"] or ()),
                observed_at=r["observed_at"],
                updated_at=r["updated_at"],
                pinned=bool(r["pinned"]),
                pinned_at=r["pinned_at"],
                reference_count=float(r["reference_count"] or 0.0),
                last_referenced_at=r["last_referenced_at"],
            )
        )
    return dict(out)


# --- the rounds ---------------------------------------------------------------------


@dataclass
class Tally:
    memories: int = 0
    touched: set[tuple[str, int]] = field(default_factory=set)
    decisions: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    affected: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    worst_share: dict[str, tuple[float, str]] = field(default_factory=dict)

    def note_round(self, kind: str, anima_id: str, lost: int, active: int) -> None:
        share = lost / active if active else 0.0
        if share > self.worst_share.get(kind, (-1.0, ""))[0]:
            self.worst_share[kind] = (share, anima_id)


def _show(m: Any) -> str:
    day = (m.observed_at or m.updated_at).date().isoformat()
    return f"f-{m.id} [{m.type}, {day}] {m.content}"


def run_anima(deep: ModuleType | SimpleNamespace, anima_id: str, views: list[Any], tally: Tally) -> None:
    tally.memories += len(views)
    by_id = {v.id: v for v in views}
    original = set(by_id)

    # round 1: contradiction + expiry
    contradictions = deep.find_contradictions(views)
    for c in contradictions:
        tally.touched.add((anima_id, c.loser_id))
        tally.decisions[c.kind].append(
            f"{anima_id} {c.kind} ({c.attribute})\n    LOSES: {_show(by_id[c.loser_id])}\n"
            f"    WINS:  {_show(by_id[c.winner_id]) if c.winner_id in by_id else '-'}"
        )
        tally.affected[c.kind] += 1
    tally.note_round("deprecate", anima_id, len(contradictions), len(views))
    gone = {c.loser_id for c in contradictions}
    current = [v for v in views if v.id not in gone]

    # round 2: split
    next_id = max(by_id, default=0) + 1
    after_split: list[Any] = []
    splits = 0
    for v in current:
        parts = deep.split_parts(v)
        if not parts:
            after_split.append(v)
            continue
        splits += 1
        tally.touched.add((anima_id, v.id))
        tally.affected["split"] += 1
        tally.decisions["split"].append(
            f"{anima_id} split\n    FROM:  {_show(v)}\n" + "\n".join(f"    PART:  {p}" for p in parts)
        )
        for p in parts:
            after_split.append(
                deep.MemoryView(
                    id=next_id,
                    type=v.type,
                    content=p,
                    confidence=v.confidence,
                    source_sessions=v.source_sessions,
                    observed_at=v.observed_at,
                    updated_at=v.updated_at,
                    pinned=False,
                    pinned_at=None,
                    reference_count=0.0,
                    last_referenced_at=None,
                )
            )
            by_id[next_id] = after_split[-1]
            next_id += 1
    tally.note_round("split", anima_id, splits, len(current))

    # round 3: merge (exact twins across types, then merge_groups within a type)
    by_norm: dict[str, list[Any]] = defaultdict(list)
    for v in after_split:
        by_norm[deep.normalize_content(v.content)].append(v)
    groups: list[tuple[tuple[int, ...], str, str]] = []
    taken: set[int] = set()
    for twins in by_norm.values():
        if len(twins) > 1:
            keep = max(twins, key=lambda m: (len(m.content), m.updated_at, m.id))
            groups.append((tuple(m.id for m in twins), keep.content, "exact twins"))
            taken |= {m.id for m in twins}
    rest = [v for v in after_split if v.id not in taken]
    groups += [(g.ids, g.content, g.reason) for g in deep.merge_groups(rest, threshold=MERGE_THRESHOLD)]
    lost = 0
    for ids, content, reason in groups:
        kind = "merge (exact twins)" if reason == "exact twins" else "merge"
        lost += len(ids) - 1
        tally.affected[kind] += len(ids)
        tally.touched.update((anima_id, i) for i in ids if i in original)
        tally.decisions[kind].append(
            f"{anima_id} {kind}: {reason}\n"
            + "\n".join(f"    SRC:   {_show(by_id[i])}" for i in ids)
            + f"\n    KEEP:  {content}"
        )
    tally.note_round("merge", anima_id, lost, len(after_split))


# --- report -------------------------------------------------------------------------


def report(tally: Tally, source: str, sample: int, seed: int) -> None:
    kinds = ["contradiction", "expiry", "split", "merge", "merge (exact twins)"]
    print(f"# deep sleep actions on {source}")
    print(f"memories: {tally.memories}")
    for kind in kinds:
        print(
            f"  {kind:<20} decisions {len(tally.decisions.get(kind, [])):>5}   memories {tally.affected.get(kind, 0):>5}"
        )
    share = len(tally.touched) / tally.memories if tally.memories else 0.0
    print(f"  touched by any round: {len(tally.touched)} ({share:.1%})")
    for rnd, (worst, anima_id) in sorted(tally.worst_share.items()):
        flag = "  <-- breaker would trip" if worst > BREAKER_RATIO else ""
        print(f"  largest per-anima share, {rnd}: {worst:.1%} ({anima_id}){flag}")
    rng = random.Random(seed)
    for kind in kinds:
        items = tally.decisions.get(kind, [])
        if not items:
            continue
        picked = items if len(items) <= sample else rng.sample(items, sample)
        print(f"\n## {kind}: {len(picked)} of {len(items)}")
        for i, text in enumerate(picked, 1):
            print(f"{i:>2}. {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("archives", nargs="*", type=Path, help="archive .jsonl files (offline extraction)")
    parser.add_argument("--from-store", metavar="DATABASE_URL", help="read active semantic_memory instead")
    parser.add_argument("--sample", type=int, default=15, help="decisions printed per kind (default 15)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--heuristics",
        default=None,
        help="module providing the deep heuristics (default: night/steps/deep/'s own modules)",
    )
    args = parser.parse_args(argv)
    if not args.archives and not args.from_store:
        parser.error("give archive files or --from-store URL")
    deep = importlib.import_module(args.heuristics) if args.heuristics else OURS
    if args.from_store:
        per_anima = store_views(args.from_store, deep)
        source = "semantic_memory (--from-store)"
    else:
        missing = [p for p in args.archives if not p.exists()]
        if missing:
            parser.error(f"not found: {', '.join(map(str, missing))}")
        per_anima = archive_views(args.archives, deep)
        source = "offline extract_facts of " + ", ".join(p.name for p in args.archives)
    tally = Tally()
    for anima_id, views in sorted(per_anima.items()):
        run_anima(deep, anima_id, views, tally)
    report(tally, source, args.sample, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

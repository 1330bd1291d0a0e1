"""How much of the whole-store deep-sleep pass an incremental night's candidates keep: on the
tuned LoCoMo dialogues, slept night by night through the real pipeline (offline engine,
the schedule's rule: full on Mondays, else incremental), each incremental night that changed
something is planned twice over the store as deep sleep found it, by the offline planner
(night/steps/deep/plan.py): round 1's contradictions and round 3's merges with the whole
store, then with the candidates only (night/steps/deep/candidates.py: what changed and its
neighbours). Printed per dialogue: nights, memories in message 1 (whole vs candidates), and
the share of the whole pass's contradictions (losers) and merges (merged pairs) the
candidates find; the target is at least 95 % (docs/cost.md).

    .venv/bin/python -m benchmarks.deep_candidates [--dialogues conv-26 conv-30]
        [--server postgresql://postgres@127.0.0.1:5432]

The offline planner finds no contradiction and no merge in these dialogues' stores (nor does
benchmarks/deep_sleep_actions.py over their raw extraction), so `--planted` also plays the
nights over the facts the offline extraction (`extract_facts`) finds each day plus, from the
second night on, what deep sleep exists for, planted among the day's facts: two restatements
of older memories (the first clause of one, one with a clause added: merges) and a new city
and job for a speaker (expiries of the older state). Each day's memories are what changed;
an incremental night retires what the candidates' pass finds, a Monday what the whole pass
finds, so a miss counts again each night until the weekly full night.

Round 3 is planned over the same store as round 1 (the rounds' own order would merge over
round 1's and 2's result; both passes get the same input, which is what the recall compares).
Each dialogue gets a fresh database `deep_candidates_<dialogue>` on the server.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from itertools import combinations
from pathlib import Path

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import StepKey
from anima_pipeline.night.frame import Night, StepResult
from anima_pipeline.night.prefix import changed_today, deep_prefix
from anima_pipeline.night.runner import run_days
from anima_pipeline.night.steps.deep.candidates import candidate_ids
from anima_pipeline.night.steps.deep.contradictions import find_contradictions
from anima_pipeline.night.steps.deep.memory_view import memory_view
from anima_pipeline.night.steps.deep.plan import merge_candidates
from anima_pipeline.night.steps.deep.step import prefilter
from anima_pipeline.store.db import open_database
from anima_pipeline.store.memories import SemanticMemory
from benchmarks.many_animas import import_rows
from benchmarks.night_cost import _fresh, dialogue_days
from testkit.data import TUNED


def passes(conn, night: Night, memories: list[SemanticMemory], changed: set[int] | None) -> tuple[set, set]:
    """(contradiction losers, merged pairs) the offline planner finds over `memories`."""
    pre = prefilter(conn, "contradiction", memories, night.deep, changed)
    losers = {c.loser_id for c in find_contradictions([memory_view(m) for m in memories if m.id in pre.ids])}
    unsettled = [m for m in memories if m.settled_at is None]
    pairs = {
        frozenset(p)
        for g in merge_candidates(unsettled, night.deep.merge_threshold)
        for p in combinations(g.ids, 2)
    }
    return losers, pairs


KEYS = ("nights", "changed", "whole", "shown", "contradictions", "found_c", "merges", "found_m")


def count_night(totals: dict[str, int], changed: set, base: list, shown: list, whole, cand) -> None:
    """Add one incremental night to `totals`: its sizes and how much of the whole pass's
    (contradictions, merged pairs) `whole` the candidates' pass `cand` found."""
    (whole_c, whole_m), (cand_c, cand_m) = whole, cand
    night = {
        "nights": 1,
        "changed": len(changed),
        "whole": len(base),
        "shown": len(shown),
        "contradictions": len(whole_c),
        "found_c": len(whole_c & cand_c),
        "merges": len(whole_m),
        "found_m": len(whole_m & cand_m),
    }
    for key in KEYS:
        totals[key] += night[key]


def offline_store(server: str, name: str):
    """A fresh database `name` on `server` with the offline engine's settings, opened."""
    url = _fresh(server, name)
    settings = Settings(
        home=Path(tempfile.mkdtemp(prefix="deep-candidates-")), database_url=url, engine="offline"
    )
    return settings, open_database(settings)


def measure(server: str, anima: str) -> dict[str, int]:
    rows, days = dialogue_days(anima)
    settings, db = offline_store(server, f"deep_candidates_{anima.replace('-', '_')}")
    totals = dict.fromkeys(KEYS, 0)

    def on_night(night: Night, _results: list[StepResult]) -> None:
        if night.mode != "incremental":
            return
        with db.transaction() as conn:
            base = deep_prefix(conn, anima, night, StepKey.SPLIT).base  # the store as deep sleep found it
            changed = changed_today(conn, anima, night) & {m.id for m in base}
            if not changed:
                return  # rounds 1 and 3 are skipped either way
            keep = candidate_ids(conn, base, changed, night.deep.trgm_threshold)
            shown = [m for m in base if m.id in keep]
            count_night(
                totals,
                changed,
                base,
                shown,
                passes(conn, night, base, changed),
                passes(conn, night, shown, changed),
            )

    try:
        import_rows(db, rows)
        run_days(db, settings, days, run_id="bench-candidates", on_night=on_night)
    finally:
        db.close()
    return totals


CITIES = ("Lisbon", "Porto", "Oslo", "Kyoto", "Chengdu", "Denver", "Austin", "Leeds")
JOBS = ("nurse", "teacher", "baker", "pilot", "chemist", "carpenter", "designer", "librarian")


def planted(rng, older: list[SemanticMemory], speakers: list[str], night_no: int) -> list[str]:
    """What the night's light sleep adds beside the extraction: restatements of two older
    memories (merges for round 3) and a speaker's new city and job (expiries for round 1)."""
    out = []
    for m in rng.sample(older, min(2, len(older))):
        text = m.content.rstrip(".")
        cut = next((text.index(s) for s in (", ", " and ", " because ") if s in text[20:]), -1)
        out.append(text[: cut + 20 * (cut >= 0)] + "." if cut >= 0 else f"{text}, as said again.")
    who = speakers[night_no % len(speakers)]
    out.append(f"{who} lives in {CITIES[night_no % len(CITIES)]}.")
    out.append(f"{who} works as a {JOBS[night_no % len(JOBS)]}.")
    return out


def measure_raw(server: str, anima: str) -> dict[str, int]:
    """The same comparison over the raw extraction and planted changes (the module's text)."""
    import random
    from datetime import datetime, time

    from anima_pipeline.night.frame import scheduled_mode
    from anima_pipeline.night.steps.light.facts import extract_facts
    from anima_pipeline.store.events import Audit
    from anima_pipeline.store.memories import MemoryRepo
    from testkit.data import TZ, group_days, locomo_dir, read_jsonl

    rows = [r for r in read_jsonl(locomo_dir() / "dev.archive.jsonl") if r["anima_id"] == anima]
    days = group_days(rows)[anima]
    speakers = sorted({r["speaker"] for r in rows if r.get("speaker")})
    rng = random.Random(7)
    settings, db = offline_store(server, f"deep_candidates_{anima.replace('-', '_')}_raw")
    totals = dict.fromkeys(KEYS, 0)
    retired: set[int] = set()
    try:
        for day, utterances in sorted(days.items()):
            night = Night(day=day, engine=None, tz=TZ, mode=scheduled_mode(day), deep=settings.deep)  # type: ignore[arg-type]
            with db.transaction() as conn:
                audit = Audit(conn=conn, anima_id=anima, run_id="raw", step="raw", day=day)
                repo = MemoryRepo(conn, audit)
                at = datetime.combine(day, time(23), tzinfo=TZ)
                older = [m for m in repo.active(anima) if m.id not in retired]
                facts = [
                    (f.type, f.content, f.confidence, f.conversation_id) for f in extract_facts(utterances)
                ]
                if older:
                    session = facts[0][3] if facts else f"{anima}:planted"
                    facts += [("world", c, 0.8, session) for c in planted(rng, older, speakers, len(older))]
                changed = {
                    repo.create(
                        anima,
                        {
                            "type": kind,
                            "content": content,
                            "confidence": confidence,
                            "source_sessions": [session],
                            "observed_at": at,
                        },
                        now=at,
                    ).id
                    for kind, content, confidence, session in facts
                }
                base = [m for m in repo.active(anima) if m.id not in retired]
                whole_c, whole_m = passes(conn, night, base, None if night.mode == "full" else changed)
                if night.mode == "full" or not changed:
                    retired |= whole_c | {i for p in whole_m for i in sorted(p)[1:]}
                    continue
                keep = candidate_ids(conn, base, changed, night.deep.trgm_threshold)
                shown = [m for m in base if m.id in keep]
                cand_c, cand_m = passes(conn, night, shown, changed)
                retired |= cand_c | {i for p in cand_m for i in sorted(p)[1:]}
            count_night(totals, changed, base, shown, (whole_c, whole_m), (cand_c, cand_m))
    finally:
        db.close()
    return totals


def _share(found: int, of: int) -> str:
    return f"{found}/{of} ({found / of:.1%})" if of else "0/0 (—)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", nargs="+", default=list(TUNED))
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument(
        "--planted",
        action="store_true",
        help="over the raw extraction with planted duplicates and state changes",
    )
    args = parser.parse_args(argv)
    logging.getLogger("anima_pipeline").setLevel(logging.ERROR)
    print(
        "over the raw extraction with planted restatements and state changes"
        if args.planted
        else "over the pipeline's store, slept night by night"
    )
    print(
        f"{'dialogue':10} {'nights':>6} {'changed':>7} {'whole':>7} {'shown':>7} {'per change':>10}  "
        f"{'contradictions found':>22}  {'merges found':>18}"
    )
    all_t: dict[str, int] = {}
    for anima in args.dialogues:
        t = (measure_raw if args.planted else measure)(args.server, anima)
        for k, v in t.items():
            all_t[k] = all_t.get(k, 0) + v
        _row(anima, t)
    if len(args.dialogues) > 1:
        _row("all", all_t)
    found = all_t["found_c"] + all_t["found_m"]
    of = all_t["contradictions"] + all_t["merges"]
    verdict = "met" if not of or found / of >= 0.95 else "NOT met"
    print(f"recall of the whole-store pass: {_share(found, of)} (target >= 95 %: {verdict})")


def _row(name: str, t: dict[str, int]) -> None:
    per = t["shown"] / t["changed"] if t["changed"] else 0.0
    print(
        f"{name:10} {t['nights']:6d} {t['changed']:7d} {t['whole']:7d} {t['shown']:7d} {per:10.1f}  "
        f"{_share(t['found_c'], t['contradictions']):>22}  {_share(t['found_m'], t['merges']):>18}"
    )


if __name__ == "__main__":
    main()

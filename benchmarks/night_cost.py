"""What one active anima-night costs on the Claude path, per step, measured with the fake
Messages API's token accounting (the model's minimum cacheable prefix, caches per model) and
the project's price table, through the real pipeline and the real SDK; with the estimate
`anima sleep --estimate` makes from the store's sizes beside it.

    .venv/bin/python -m benchmarks.night_cost [--memories 200 400 550] [--database-url URL]
        [--splits default all-main deep-main]

For each store size and each mode (sync, batch) it prints, per step: the model, calls, input,
cache-write, cache-read and output tokens, the measured dollars and the estimated dollars;
then the night's total against the targets (at most $0.04 sync, $0.02 batch, at 400
memories), and the batch night again with each batch taking `--turnaround` seconds for the
fake's cache (entries live 5 minutes from their last use), where the turns lose their cache. `--splits` also prices other model splits (docs/cost.md: which steps on which
model), synchronous, at each size. The anima is the one of benchmarks/claude_cache.py: a day
of four short conversations, light sleep records two facts in one answer, every other step
answers at once (the steps that must write write once). Without --database-url the store is
an embedded PostgreSQL under a temporary ANIMA_HOME (a URL must name an empty scratch database).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import SMALL_MODEL_STEPS, STEP_ORDER
from anima_pipeline.llm.anthropic.batches import BatchCollector
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.prompt_cost import with_expected_output
from anima_pipeline.night.estimate import estimate_night
from anima_pipeline.night.frame import scheduled_mode
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.db import Database, open_database
from benchmarks.claude_cache import _clear
from testkit.claude_night import DAY, KEY, responder, seed
from testkit.fake_messages_api import FakeMessagesAPI

TARGETS = {"sync": 0.04, "batch": 0.02}  # dollars per active anima-night at 400 memories
DIALOGUE_TARGETS = {"sync": 0.03, "batch": 0.015}  # a real dialogue day, real output included
SPLITS: dict[str, dict[str, str]] = {
    "default": {},  # core/steps.py's SMALL_MODEL_STEPS on the small model, the rest on the main one
    "all-main": dict.fromkeys(STEP_ORDER, "main"),
    # rounds 2-4, the dream and the self refresh on the main model: they read round 1's cache
    "deep-main": dict.fromkeys(
        ("semantic_memory/split", "semantic_memory/merged", "semantic_memory/pins_reviewed")
        + ("dreams/journal", "self_blocks/refreshed"),
        "main",
    ),
    "all-small": dict.fromkeys(STEP_ORDER, "small"),
}


def one_night(
    db: Database, settings: Settings, memories: int, turnaround_s: float = 0.0
) -> tuple[dict[str, Usage], Usage, dict[str, Usage]]:
    """(measured usage per step, the estimate's total, the estimate per step) of one night on
    a fresh store; `turnaround_s`: how much the fake's cache ages between two batches."""
    _clear(db)
    seed(db, memories)
    estimate = estimate_night(db, settings, DAY, "full")
    measured, _ = fake_night(
        db, settings, DAY, responder(False), mode="full", force=True, turnaround_s=turnaround_s
    )
    estimated = {s.step: s.usage for s in estimate.steps}
    return measured, sum(estimated.values(), Usage()), estimated


def fake_night(
    db: Database, settings: Settings, day, answer, *, turnaround_s: float = 0.0, **run
) -> tuple[dict[str, Usage], int]:
    """The night of `day` on the Claude path (the real engine and SDK) against the fake Messages
    API answering with `answer`, in settings.llm.mode (a batch ages the fake's cache by
    `turnaround_s`); `run`: run_days' own options. (usage per step that called the model,
    requests sent to /v1/messages)."""
    collector = BatchCollector(window_s=0.05, poll_s=0.01) if settings.llm.mode == "batch" else None
    with FakeMessagesAPI(min_cache_tokens=None, responder=answer, batch_turnaround_s=turnaround_s) as fake:
        engine = AnthropicEngine(
            settings.model,
            SecretStr(KEY),
            base_url=fake.url,
            budget=Budget(),
            settings=settings,
            timeout=30,
            collector=collector,
        )
        try:
            results = run_days(db, settings, [day], engine=engine, **run)
        finally:
            engine.close()
        requests = len(fake.messages)
    measured: dict[str, Usage] = {}
    for r in results:
        if r.usage.calls:
            measured[r.step] = measured.get(r.step, Usage()) + r.usage
    return measured, requests


def step_table(settings: Settings, title: str, measured, estimated) -> tuple[Usage, float, Usage, dict]:
    """Prints, per step: the measured night, the same with real output (core/steps.py's
    STEP_OUTPUT, what the estimate counts) and the estimate, then the night's line; returns
    (measured, $ with real output, estimate, measured $ per model) of the night."""
    batch = settings.llm.mode == "batch"
    print(f"\n== {title} (main {settings.model}, small {settings.small_model_for()})")
    head = f"{'step':34} {'model':18} {'calls':>5} {'input':>7} {'c-write':>8} {'c-read':>8} {'output':>6}"
    print(f"{head} {'$ measured':>11} {'$ real out':>11} {'$ estimate':>11}")
    real, by_model = 0.0, {}
    for step in STEP_ORDER:
        u, e = measured.get(step), estimated.get(step)
        if u is None and e is None:
            continue
        u = u or Usage()
        r = realistic(settings, step, u, batch) if u.calls else 0.0
        model = settings.step_model(step)
        by_model[model] = by_model.get(model, 0.0) + u.cost_usd
        real += r
        print(
            f"{step:34} {model:18} {u.calls:5d} {u.input_tokens:7d} "
            f"{u.cache_write_tokens:8d} {u.cache_read_tokens:8d} {u.output_tokens:6d} "
            f"{u.cost_usd:11.5f} {r:11.5f} {(e.cost_usd if e else 0):11.5f}"
        )
    total = sum(measured.values(), Usage())
    est = sum(estimated.values(), Usage())
    print(
        f"{'the night':53} {total.calls:5d} {total.input_tokens:7d} {total.cache_write_tokens:8d} "
        f"{total.cache_read_tokens:8d} {total.output_tokens:6d} {total.cost_usd:11.5f} {real:11.5f} "
        f"{est.cost_usd:11.5f}"
    )
    return total, real, est, by_model


def report(settings: Settings, memories: int, mode: str, measured, estimated) -> tuple[float, float]:
    """The night's step table and its line against the target; returns (measured, estimate)
    of the night."""
    total, real, est, _ = step_table(settings, f"{memories} memories, {mode}", measured, estimated)
    off = (est.cost_usd - real) / real if real else 0.0
    target = TARGETS[mode]
    verdict = "met" if total.cost_usd <= target else "NOT met"
    note = f" (target <= ${target:.2f} at 400 memories: {verdict})" if memories == 400 else ""
    print(
        f"measured ${total.cost_usd:.4f}, with real output ${real:.4f}, estimate ${est.cost_usd:.4f} "
        f"({off:+.1%} of the night with real output){note}"
    )
    return total.cost_usd, est.cost_usd


# ---- a real dialogue day (--dialogue) ---------------------------------------------------------


def _admin(server: str):
    import psycopg

    return psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True)


def _fresh(server: str, name: str, template: str | None = None) -> str:
    with _admin(server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return f"{server.rstrip('/')}/{name}"


def dialogue_days(anima: str) -> tuple[list[dict], list]:
    """The archive rows of one LoCoMo dialogue and its talking days (local), in order."""
    from testkit.data import group_days, locomo_dir, read_jsonl

    rows = [r for r in read_jsonl(locomo_dir() / "dev.archive.jsonl") if r["anima_id"] == anima]
    return rows, sorted(group_days(rows)[anima])


def day_responder(facts: list[dict]):
    """A scripted model: light sleep's stage 1 records `facts` in its first turn (one tool call
    each, as a model answers); every other step answers as the fake's autopilot does."""
    from testkit.fake_messages_api import is_stage_one, reply, sleep_autopilot, tool_use

    def answer(body: dict) -> dict | None:
        if is_stage_one(body):
            if len(body["messages"]) == 1 and facts:
                return reply(*(tool_use("create_semantic_memory", f) for f in facts))
            return None
        return sleep_autopilot(body)

    return answer


def realistic(settings: Settings, step: str, u: Usage, batch: bool) -> float:
    """The step's measured usage priced with what a real model answers instead of the fake's
    terse text (core/steps.py's STEP_OUTPUT, when more than measured)."""
    return with_expected_output(settings.step_model(step), step, u, batch=batch)


def dialogue(args) -> None:
    """One held-out LoCoMo dialogue slept offline to its second-to-last talking day, then its
    last day on the Claude path, sync and batch, each on a copy of the same store."""
    from anima_pipeline.core.steps import DEEP_SLEEP, StepKey
    from anima_pipeline.store.events import semantic_writes
    from benchmarks.many_animas import import_rows

    rows, days = dialogue_days(args.dialogue)
    base_name = f"nightcost_{args.dialogue.replace('-', '_')}_base"
    url = _fresh(args.server, base_name)
    home = Path(tempfile.mkdtemp(prefix="nightcost-"))
    offline = Settings(home=home, database_url=url, engine="offline")
    db = open_database(offline)
    try:
        import_rows(db, rows)
        run_days(db, offline, days[:-1], run_id="bench-offline")
        with db.transaction() as conn:
            active = conn.execute(
                "SELECT count(*) AS n FROM semantic_memory WHERE anima_id = %s AND status = 'active'",
                (args.dialogue,),
            ).fetchone()["n"]
    finally:
        db.close()
    last = days[-1]
    # what light sleep records that day, offline: the scripted model records the same facts
    url = _fresh(args.server, f"nightcost_{args.dialogue.replace('-', '_')}_offline", template=base_name)
    db = open_database(offline.model_copy(update={"database_url": url}))
    try:
        run_days(db, offline.model_copy(update={"database_url": url}), [last], run_id="bench-offline-last")
        with db.transaction() as conn:
            facts = [
                {k: e["after"][k] for k in ("type", "content", "source_sessions")}
                for e in semantic_writes(conn, args.dialogue, last, [StepKey.SEMANTIC_EXTRACTED])
                if e["before"] is None
            ]
            offline_deep = [
                (e["step"], e["op"]) for e in semantic_writes(conn, args.dialogue, last, list(DEEP_SLEEP))
            ]
    finally:
        db.close()
    print(
        f"{args.dialogue}: {len(rows)} messages over {len(days)} days; slept offline to {days[-2]} "
        f"({active} active memories); the last day {last} ({last:%A}) on the Claude path: light "
        f"sleep records the {len(facts)} facts the offline night records that day (offline deep sleep "
        f"then writes {len(offline_deep)} events)"
    )
    totals = {}
    for mode in ("sync", "batch"):
        url = _fresh(args.server, f"nightcost_{args.dialogue.replace('-', '_')}_{mode}", template=base_name)
        settings = Settings(home=home, database_url=url, engine="anthropic")
        settings = settings.model_copy(update={"llm": settings.llm.model_copy(update={"mode": mode})})
        db = open_database(settings)
        try:
            estimate = estimate_night(db, settings, last, scheduled_mode(last))
            measured, requests = fake_night(db, settings, last, day_responder(facts), run_id=f"bench-{mode}")
        finally:
            db.close()
        est = {s.step: s.usage for s in estimate.steps}
        tot, real, e_tot, by_model = step_table(settings, mode, measured, est)
        print("per model: " + ", ".join(f"{m} ${c:.4f}" for m, c in by_model.items()))
        if mode == "sync":
            print(f"requests sent: {requests}")
        totals[mode] = (tot.cost_usd, real, e_tot.cost_usd)
    print("\nmode   measured $  with real output $  estimate $  target (real output)")
    for mode, (cost, real, est_cost) in totals.items():
        target = DIALOGUE_TARGETS[mode]
        verdict = "met" if real <= target else "NOT met"
        print(f"{mode:6} {cost:10.4f} {real:18.4f} {est_cost:11.4f}  <= ${target:.3f}: {verdict}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, nargs="+", default=[200, 400, 550])
    parser.add_argument("--database-url", default=None, help="an empty scratch database (default: embedded)")
    parser.add_argument(
        "--splits", nargs="*", default=["all-main", "deep-main", "all-small"], choices=list(SPLITS)
    )
    parser.add_argument(
        "--turnaround", type=float, default=600.0, help="seconds a batch takes, for the slow-batch row"
    )
    parser.add_argument(
        "--dialogue",
        default=None,
        help="a LoCoMo dialogue (conv-41): its last day instead of synthetic stores",
    )
    parser.add_argument(
        "--server",
        default="postgresql://postgres@127.0.0.1:5432",
        help="with --dialogue: a PostgreSQL server where it may create nightcost_* databases",
    )
    args = parser.parse_args(argv)
    logging.getLogger("anima_pipeline").setLevel(logging.ERROR)  # the quiet steps' "declined" notes
    if args.dialogue:
        dialogue(args)
        return
    rows, split_rows = [], []
    with tempfile.TemporaryDirectory() as home:
        base = Settings(home=Path(home), database_url=args.database_url, engine="anthropic")
        db = open_database(base)
        try:
            for n in args.memories:
                for mode in ("sync", "batch"):
                    settings = base.model_copy(update={"llm": base.llm.model_copy(update={"mode": mode})})
                    measured, _, estimated = one_night(db, settings, n)
                    rows.append((n, mode, *report(settings, n, mode, measured, estimated)))
                # a batch that takes longer than the cache's 5 minutes: the turns lose it
                settings = base.model_copy(update={"llm": base.llm.model_copy(update={"mode": "batch"})})
                measured, est, _ = one_night(db, settings, n, turnaround_s=args.turnaround)
                slow = sum(measured.values(), Usage()).cost_usd
                print(
                    f"batch, {args.turnaround:.0f} s a batch: measured ${slow:.4f} (estimate, cache kept: ${est.cost_usd:.4f})"
                )
                rows.append((n, f"batch {args.turnaround:.0f}s", slow, est.cost_usd))
                for split in args.splits:
                    settings = base.model_copy(
                        update={"llm": base.llm.model_copy(update={"step_models": SPLITS[split]})}
                    )
                    measured, est, _ = one_night(db, settings, n)
                    split_rows.append((n, split, sum(measured.values(), Usage()).cost_usd, est.cost_usd))
        finally:
            db.close()
    print("\nmemories  mode        measured $  estimate $  estimate/measured")
    for n, mode, cost, est in rows:
        print(f"{n:8d}  {mode:10} {cost:11.4f} {est:11.4f} {est / cost if cost else 0:18.3f}")
    if split_rows:
        print(f"\nmodel splits, sync (default: {', '.join(SMALL_MODEL_STEPS)} on the small model)")
        print("memories  split       measured $  estimate $")
        for n, split, cost, est in [(n, "default", c, e) for n, m, c, e in rows if m == "sync"] + split_rows:
            print(f"{n:8d}  {split:10} {cost:11.4f} {est:11.4f}")


if __name__ == "__main__":
    main()

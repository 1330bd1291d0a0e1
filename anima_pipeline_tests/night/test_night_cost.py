"""The cost of a Claude night (docs/cost.md), against the fake Messages API through the real SDK and
a real PostgreSQL: a model per step, deep sleep's prefix read from the cache by the dream and
the self refresh (one write per prefix and model), nothing sent for a store that did not change,
and the estimate made from the store's sizes within 20 % of what the night cost."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import DEEP_SLEEP
from anima_pipeline.defs.night.metadata import step_metadata
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.failures import BudgetExceeded
from anima_pipeline.llm.pricing import cost_usd, price_for
from anima_pipeline.llm.prompt_cost import with_expected_output
from anima_pipeline.night.estimate import estimate_night
from anima_pipeline.night.frame import StepResult
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.db import Database
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline_tests.conftest import cli_env, invoke_cli, run_cli
from testkit.claude_night import ANIMA, DAY, KEY, responder, seed
from testkit.fake_messages_api import FakeMessagesAPI, PromptCache, reply, sleep_autopilot, text

MAIN, SMALL = "claude-sonnet-5-5", "claude-haiku-5-5"
DEEP_FAMILY = (*DEEP_SLEEP, "dreams/journal", "self_blocks/refreshed")


def night(
    db: Database,
    settings: Settings,
    answer=None,
    *,
    memories: int = 250,
    seeded: bool = True,
    force: bool = False,
    budget: Budget | None = None,
    sent: list[dict] | None = None,
    mode: str = "full",
) -> tuple[list[StepResult], list[dict], list[dict]]:
    """One full night of the benchmark's anima (250 memories: deep sleep's prefix is over the
    small model's minimum cacheable length); (results, request bodies, responses). `sent`
    receives the request bodies also when the night raises."""
    if seeded:
        seed(db, memories)
    with FakeMessagesAPI(min_cache_tokens=None, responder=answer or responder(False)) as fake:
        engine = AnthropicEngine(
            settings.model,
            SecretStr(KEY),
            base_url=fake.url,
            budget=budget or Budget(),
            settings=settings,
            timeout=30,
        )
        try:
            results = run_days(db, settings, [DAY], mode=mode, force=force, engine=engine)
        finally:
            engine.close()
            if sent is not None:
                sent += fake.messages
        return results, fake.messages, fake.responses


def _step_of(body: dict) -> str:
    """Which step sent a request (the task is the first user turn's last block)."""
    task = body["messages"][0]["content"][-1]["text"]
    for marker, step in (
        ("this is round 1", DEEP_SLEEP[0]),
        ("this is round 2", DEEP_SLEEP[1]),
        ("this is round 3", DEEP_SLEEP[2]),
        ("this is round 4", DEEP_SLEEP[3]),
        ("Message 3 — the dream", "dreams/journal"),
        ("Message 3 — the self-layer refresh", "self_blocks/refreshed"),
    ):
        if marker in task:
            return step
    return "other"


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    return Settings(home=tmp_path, database_url=db_url, engine="anthropic")


def test_each_step_runs_on_its_model_and_is_billed_at_its_price(db: Database, settings: Settings) -> None:
    results, bodies, responses = night(db, settings)
    models = {}
    for body in bodies:
        models.setdefault(_step_of(body), set()).add(body["model"])
    # judgement on the main model; every step that allows it on the small one
    assert models[DEEP_SLEEP[0]] == {MAIN}
    assert all(models[s] == {SMALL} for s in (*DEEP_SLEEP[1:], "dreams/journal", "self_blocks/refreshed"))
    by_step = {r.step: r for r in results}
    extracted = by_step["semantic_memory/extracted"].usage
    assert extracted.calls == 1 and {  # its two facts in one answer, which ends the step
        b["model"] for b in bodies if "create_semantic_memory" in json.dumps(b["tools"])
    } == {MAIN}
    # the cost of a step is its own model's price, not the main model's
    dream = [(b, r) for b, r in zip(bodies, responses, strict=True) if _step_of(b) == "dreams/journal"]
    expected = sum(
        cost_usd(
            SMALL,
            r["usage"]["input_tokens"],
            r["usage"]["output_tokens"],
            r["usage"]["cache_read_input_tokens"],
            r["usage"]["cache_creation_input_tokens"],
        )
        for _, r in dream
    )
    assert by_step["dreams/journal"].usage.cost_usd == pytest.approx(expected, abs=1e-6) and expected > 0


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("ANIMA_LLM_STEP_MODELS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_step_models_come_from_the_environment_and_bad_ones_are_refused(monkeypatch) -> None:
    monkeypatch.setenv(
        "ANIMA_LLM_STEP_MODELS",
        json.dumps({"dreams/journal": "main", "semantic_memory/split": "claude-opus-5-5"}),
    )
    s = Settings()
    assert s.step_model("dreams/journal") == s.model == MAIN
    assert s.step_model("semantic_memory/split") == "claude-opus-5-5"
    assert s.step_model("self_blocks/refreshed") == SMALL  # the default for a step not named
    assert (
        s.step_model("semantic_memory/deconflicted", "claude-opus-5") == "claude-opus-5"
    )  # the engine's main
    with pytest.raises(ValueError, match="ANIMA_LLM_STEP_MODELS.*unknown step"):
        settings_from({"ANIMA_LLM_STEP_MODELS": '{"dreams/jounral": "small"}'}, monkeypatch)
    with pytest.raises(ValueError, match="dreams/journal.*no price known for model 'gpt-9'"):
        settings_from({"ANIMA_LLM_STEP_MODELS": '{"dreams/journal": "gpt-9"}'}, monkeypatch)
    with pytest.raises(ValueError, match="ANIMA_SMALL_MODEL.*no price known"):
        settings_from({"ANIMA_SMALL_MODEL": "claude-haiku-9"}, monkeypatch)


def test_the_small_model_is_priced_by_prompt_length() -> None:
    p = price_for(SMALL)
    assert (p.input, p.output, p.cache_write, p.cache_read) == (0.10, 0.50, 0.125, 0.01)
    short = cost_usd(SMALL, 60_000, 1_000, cache_read=40_000)  # a 100,000-token prompt: the low tier
    assert short == pytest.approx((60_000 * 0.10 + 1_000 * 0.50 + 40_000 * 0.01) / 1e6)
    long = cost_usd(SMALL, 60_001, 1_000, cache_read=40_000)  # one token over: every token at the high tier
    assert long == pytest.approx(
        (60_001 * 0.50 + 1_000 * 2.50 + 40_000 * 0.05) / 1e6, abs=1e-6
    )  # rounded to $1e-6


def test_dream_and_self_refresh_read_deep_sleeps_prefix_written_once_per_model(
    db: Database, settings: Settings
) -> None:
    _, bodies, responses = night(db, settings)
    family = [(b, r["usage"]) for b, r in zip(bodies, responses, strict=True) if _step_of(b) in DEEP_FAMILY]
    firsts = [(b, u) for b, u in family if len(b["messages"]) == 1]
    by_step = {_step_of(b): (b, u) for b, u in firsts}
    assert set(by_step) == set(DEEP_FAMILY)
    # the small model's members send one prefix byte for byte: tools, system and message 1
    small = [by_step[s] for s in (*DEEP_SLEEP[1:], "dreams/journal", "self_blocks/refreshed")]
    for b, _ in small:
        assert b["tools"] == small[0][0]["tools"] and b["system"] == small[0][0]["system"]
        assert b["messages"][0]["content"][0] == small[0][0]["messages"][0]["content"][0]
    assert small[0][0]["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    prefix = small[0][1]["cache_creation_input_tokens"]
    assert prefix > 4096  # over the small model's minimum: cached
    assert all(
        u["cache_read_input_tokens"] == prefix and u["cache_creation_input_tokens"] == 0 for _, u in small[1:]
    )
    # round 1 is alone on the main model: its own, smaller prefix (only its tool and rules), written once
    r1, u1 = by_step[DEEP_SLEEP[0]]
    assert [t["name"] for t in r1["tools"]] == ["deprecate_semantic_memory"]
    assert "Round 2 — split" not in json.dumps(
        r1["system"], ensure_ascii=False
    ) and "Round 2 — split" in json.dumps(small[0][0]["system"], ensure_ascii=False)
    assert r1["messages"][0]["content"][0]["text"] == small[0][0]["messages"][0]["content"][0]["text"]
    # ... and no later request reads it (one planned turn, no other member on its model): not
    # marked for the cache, sent as plain input (a write costs 1.25 times the input price)
    assert not [b for b in (*r1["system"], *r1["messages"][0]["content"]) if "cache_control" in b]
    assert u1["cache_creation_input_tokens"] == 0 and u1["input_tokens"] > 0
    # one write of the family's prefix per model over the whole night
    written = sum(u["cache_creation_input_tokens"] for b, u in firsts)
    assert written == prefix


def test_an_incremental_nights_rounds_1_and_3_send_only_what_changed_and_its_neighbours(
    db: Database, settings: Settings
) -> None:
    _, bodies, _ = night(db, settings, mode="incremental")  # light sleep records two facts
    firsts = {_step_of(b): b for b in bodies if len(b["messages"]) == 1 and _step_of(b) in DEEP_FAMILY}

    def shown(step: str) -> list[str]:
        text = firsts[step]["messages"][0]["content"][0]["text"]
        return re.findall(r"^(f-\d+) ", text, flags=re.M)

    with db.transaction() as conn:
        new = [f"f-{m.id}" for m in MemoryRepo(conn).active(ANIMA) if m.content.startswith("Sam had lunch")]
    assert len(new) == 2
    for step in ("semantic_memory/deconflicted", "semantic_memory/merged"):
        ids = shown(step)
        assert set(new) <= set(ids) and len(ids) < 250 // 5, (step, len(ids))
        assert "changed since the last deep sleep" in json.dumps(firsts[step]["system"])
    # the rounds that keep the whole store (split, pins), the dream and the self refresh
    assert len(shown("semantic_memory/split")) == 252
    assert shown("semantic_memory/split") == shown("dreams/journal")


def test_all_of_deep_sleep_on_one_model_shares_one_prefix(db: Database, settings: Settings) -> None:
    one = settings.model_copy(
        update={"llm": settings.llm.model_copy(update={"step_models": dict.fromkeys(DEEP_FAMILY, "main")})}
    )
    _, bodies, responses = night(db, one)
    firsts = [
        r["usage"]
        for b, r in zip(bodies, responses, strict=True)
        if _step_of(b) in DEEP_FAMILY and len(b["messages"]) == 1
    ]
    assert len(firsts) == 6
    assert firsts[0]["cache_creation_input_tokens"] > 0
    assert all(u["cache_read_input_tokens"] == firsts[0]["cache_creation_input_tokens"] for u in firsts[1:])
    assert all(u["cache_creation_input_tokens"] == 0 for u in firsts[1:])


def test_dream_and_self_refresh_are_skipped_when_the_store_did_not_change(
    db: Database, settings: Settings
) -> None:
    def quiet(body: dict) -> dict | None:  # light sleep records nothing; deep sleep changes nothing
        tools = {t["name"] for t in body.get("tools") or []}
        if "create_semantic_memory" in tools:
            return reply(text("Nothing worth recording today."))
        return sleep_autopilot(body)

    results, bodies, _ = night(db, settings, quiet)
    by_step = {r.step: r for r in results}
    for step in ("dreams/journal", "self_blocks/refreshed"):
        r = by_step[step]
        assert r.stats["skipped_unchanged"] == 1 and r.stats["skip_reason"] == "store unchanged that day"
        assert r.usage.calls == 0
    assert not [b for b in bodies if _step_of(b) in ("dreams/journal", "self_blocks/refreshed")]
    with db.transaction() as conn:  # and the Dagster metadata of the partition says so
        md = step_metadata(conn, DAY, "dreams/journal", [by_step["dreams/journal"]], llm=True, mode="full")
    assert md["skipped_unchanged"].value == 1 and md["llm_calls"].value == 0
    # a store that changed is dreamt over (the benchmark's night records two facts)
    results, _, _ = night(db, settings, seeded=False, force=True)
    assert {r.step: r for r in results}["dreams/journal"].usage.calls > 0


@pytest.mark.parametrize("memories", [60, 250])
def test_the_estimate_is_within_20_percent_of_the_measured_night(
    db: Database, settings: Settings, memories: int
) -> None:
    seed(db, memories)
    estimate = estimate_night(db, settings, DAY, "full")
    results, _, _ = night(db, settings, responder(True), seeded=False)  # round 1 deprecates one
    # the fake answers tersely; the estimate counts what a real model writes (core/steps.py)
    measured = sum(with_expected_output(settings.step_model(r.step), r.step, r.usage) for r in results)
    assert estimate.animas == 1 and measured > 0
    assert abs(estimate.total.cost_usd - measured) <= 0.2 * measured, (estimate.total.cost_usd, measured)
    steps = {s.step: s for s in estimate.steps}
    assert steps["semantic_memory/deconflicted"].model == MAIN and steps["dreams/journal"].model == SMALL


def test_the_budget_guard_refuses_a_run_whose_estimate_is_over_it_before_sending_anything(
    db: Database, settings: Settings
) -> None:
    seed(db, 250)
    expected = estimate_night(db, settings, DAY, "full").total.cost_usd
    sent: list[dict] = []
    with pytest.raises(BudgetExceeded) as exc:
        night(db, settings, seeded=False, budget=Budget(max_usd=expected * 0.5), sent=sent)
    assert sent == []
    assert f"estimated at ${expected:.4f}" in str(exc.value) and "nothing was sent" in str(exc.value)
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM sleep_state").fetchone()["n"] == 0
    # within the budget the same run goes ahead
    results, _, _ = night(db, settings, seeded=False, budget=Budget(max_usd=expected * 2))
    assert sum(r.usage.cost_usd for r in results) > 0


def test_anima_sleep_estimate_prints_the_steps_and_sends_nothing(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    seed(db, 250)
    with FakeMessagesAPI(min_cache_tokens=None) as fake:
        env = cli_env(
            tmp_path / "home",
            db_url,
            ANIMA_ENGINE="anthropic",
            ANTHROPIC_API_KEY=KEY,
            ANTHROPIC_BASE_URL=fake.url,
            ANIMA_BUDGET_USD="0.001",
        )
        result = run_cli(["sleep", "--day", str(DAY), "--mode", "full", "--estimate"], env)
        assert fake.requests == []
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for step in ("semantic_memory/extracted", "semantic_memory/deconflicted", "dreams/journal"):
        assert step in out
    assert MAIN in out and SMALL in out and "nothing was sent" in out and "refused" in out
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM sleep_state").fetchone()["n"] == 0


def test_the_estimate_of_a_night_already_done_says_so_and_names_force(
    db: Database, settings: Settings, db_url: str, tmp_path: Path
) -> None:
    night(db, settings)
    env = cli_env(tmp_path / "home", db_url, ANIMA_ENGINE="anthropic", ANTHROPIC_API_KEY=KEY)
    args = ["sleep", "--day", str(DAY), "--mode", "full", "--estimate"]
    done = invoke_cli(args, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"the night of {DAY} is already done" in done.stdout and "`--force` estimates a re-run" in done.stdout
    )
    assert "$0.0000" in done.stdout
    again = invoke_cli([*args, "--force"], env)
    assert again.returncode == 0 and "already done" not in again.stdout, again.stdout + again.stderr
    assert "$0.0000;" not in again.stdout  # the re-run's own price


def test_the_day_summary_reads_light_sleeps_transcript_from_the_cache(
    db: Database, settings: Settings
) -> None:
    day_family = ("semantic_memory/extracted", "emotional_anchors/marked", "temporal_summaries/day")
    one = settings.model_copy(
        update={"llm": settings.llm.model_copy(update={"step_models": dict.fromkeys(day_family, "main")})}
    )
    _, bodies, responses = night(db, one)

    def first(marker: str) -> tuple[dict, dict]:
        return next(
            (b, r["usage"])
            for b, r in zip(bodies, responses, strict=True)
            if len(b["messages"]) == 1 and marker in b["messages"][0]["content"][-1]["text"]
        )

    stage1, u1 = first("Record the durable facts")
    anchors, u2 = first("record emotional anchors")
    summary, u3 = first("Write the summary of today")
    for b in (anchors, summary):  # deep sleep and reference sync ran in between: same prefix
        assert b["tools"] == stage1["tools"] and b["system"] == stage1["system"]
        assert b["messages"][0]["content"][0] == stage1["messages"][0]["content"][0]  # the transcript
    assert "## Conversation" in stage1["messages"][0]["content"][0]["text"]
    written = u1["cache_creation_input_tokens"]
    assert written > 0 and u2["cache_read_input_tokens"] == written == u3["cache_read_input_tokens"]
    assert u2["cache_creation_input_tokens"] == 0 == u3["cache_creation_input_tokens"]


def test_the_fakes_cache_expires_five_minutes_after_its_last_use() -> None:
    """The TTL the night's figures assume: a read within 5 minutes of the last use hits (and
    refreshes the entry), a read later misses; a 1-hour breakpoint lives an hour."""

    def body(ttl: str | None = None) -> dict:
        control = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
        block = {"type": "text", "text": "x" * 8_000, "cache_control": control}
        return {"model": SMALL, "max_tokens": 10, "messages": [{"role": "user", "content": [block]}]}

    cache = PromptCache(min_tokens=1)
    assert cache.account(body())["cache_creation_input_tokens"] > 0
    cache.advance(290)
    assert cache.account(body())["cache_read_input_tokens"] > 0  # refreshed: 5 more minutes
    cache.advance(290)
    assert cache.account(body())["cache_read_input_tokens"] > 0
    cache.advance(301)
    assert cache.account(body())["cache_read_input_tokens"] == 0  # expired: written again
    assert cache.account(body("1h"))["cache_read_input_tokens"] > 0
    cache.advance(3_000)
    assert cache.account(body("1h"))["cache_read_input_tokens"] > 0

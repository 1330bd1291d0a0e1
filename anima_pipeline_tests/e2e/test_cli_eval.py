"""`anima eval locomo` end to end: a tiny synthetic LoCoMo-shaped file (written for this
project), imported, slept and asked through the real CLI, against the fake Messages API with
scripted answers and judgments; and the offline measure without a key."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from anima_pipeline_tests.conftest import cli_env, invoke_cli
from testkit.fake_messages_api import FakeMessagesAPI, is_stage_one, reply, sleep_autopilot, text, tool_use

FIXTURE = Path(__file__).parents[1] / "data" / "locomo_tiny.json"
KEY = "sk-ant-test-EVAL-5150"
FACTS = {
    "session_1": "Nora volunteers at the animal shelter on Elm Street.",
    "session_2": "Nora adopted Pepper, a beagle from the shelter, on 9 March 2025; her sister Ines lives in Lisbon.",
}
ANSWERS = {  # question -> (the answer model's answer, the judge's label)
    "Where did Nora find the dog she adopted?": ("At the Elm Street animal shelter", "CORRECT"),
    "When did Nora adopt Pepper?": ("10 March 2025", "WRONG"),
    "Would Nora enjoy a dog-friendly cafe?": ("Yes, she loves dogs", "CORRECT"),
    "Where does Nora's sister live?": ("Lisbon", "CORRECT"),
}


def answer_or_judge(
    body: dict[str, Any], who: str, answers: dict[str, tuple[str, str]]
) -> dict[str, Any] | None:
    """The scripted answer (or the judge's label) for an eval request about `who`; None for
    any other request (the night's)."""
    system = body.get("system")
    system = system if isinstance(system, str) else ""
    prompt = json.dumps(body["messages"], ensure_ascii=False)
    if system.startswith("You answer questions"):
        question = re.search(rf"Question about {who}: (.+?)\"", prompt).group(1)
        return reply(text(answers[question][0]))
    if system.startswith("You are a grader"):
        question = re.search(r"Question: (.+?)\\n", prompt).group(1)
        return reply(text(json.dumps({"reasoning": "scripted", "label": answers[question][1]})))
    return None


def model(body: dict[str, Any]) -> dict[str, Any] | None:
    if (scripted := answer_or_judge(body, "Nora", ANSWERS)) is not None:
        return scripted
    prompt = json.dumps(body["messages"], ensure_ascii=False)
    if is_stage_one(body) and len(body["messages"]) == 1:
        conv = re.search(r"## Conversation (\S+)", prompt).group(1)
        fact = {"type": "experience", "content": FACTS[conv.split(":")[1]], "source_sessions": [conv]}
        return reply(tool_use("create_semantic_memory", fact))
    return sleep_autopilot(body)


def eval_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return invoke_cli(["eval", "locomo", str(FIXTURE), *args], env)


def base_env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path)


def test_eval_locomo_prints_j_per_category_against_the_fake_api(db_url: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    env = {**base_env(tmp_path), "ANIMA_ENGINE": "anthropic", "ANTHROPIC_API_KEY": KEY}
    with FakeMessagesAPI(min_cache_tokens=None, responder=model) as fake:
        env["ANTHROPIC_BASE_URL"] = fake.url
        result = eval_cli(env, "--database-url", db_url, "--report", str(report))
        bodies = fake.messages
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert KEY not in out
    assert "J per category" in out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if re.match(r"\s*[0-4]\s+\S", line)}
    assert float(rows["multi-hop"][-1]) == 1.0 and float(rows["temporal"][-1]) == 0.0
    assert float(rows["single-hop"][-1]) == 1.0 and "0.75" in out  # overall 3 of 4
    data = json.loads(report.read_text())
    j = {r["name"]: r["J"] for r in data["j_by_category"]}
    assert j == {
        "multi-hop": 1.0,
        "temporal": 0.0,
        "open-domain": 1.0,
        "single-hop": 1.0,
        "overall 1-4": 0.75,
    }
    assert len(data["questions"]) == 4  # category 5 is not judged
    assert data["night_cost_usd"] > 0 and data["eval_cost_usd"] > 0 and data["eval_usage"]["calls"] == 8
    assert all(q["context_tokens"] > 0 for q in data["questions"])
    # the answer model saw the memories the night wrote
    answers = [b for b in bodies if isinstance(b.get("system"), str) and b["system"].startswith("You answer")]
    assert len(answers) == 4 and all("Elm Street" in json.dumps(b["messages"]) for b in answers)
    assert "night cost $" in out and "eval cost $" in out


def test_eval_locomo_offline_prints_the_context_keyword_measure(db_url: str, tmp_path: Path) -> None:
    report = tmp_path / "offline.json"
    env = {**base_env(tmp_path), "ANIMA_ENGINE": "offline"}
    result = eval_cli(env, "--database-url", db_url, "--report", str(report))
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "offline context measure" in out and "J per category" not in out
    data = json.loads(report.read_text())
    assert data["j_by_category"] is None and data["eval_cost_usd"] == 0
    overall = next(r for r in data["keyword_coverage"] if r["category"] == 0)
    assert overall["questions"] == 4 and 0 <= overall["share"] <= 1
    assert any(q["keywords_found"] for q in data["questions"])  # "Lisbon" is in the day's messages
    # output to files (no terminal): each phase says when it starts and ends, on stderr
    for line in ("importing the dialogues: 0/1", "sleeping their days: 0/", "asking: 0/4", "asking: 4/4"):
        assert line in result.stderr, result.stderr


def test_eval_locomo_names_the_bad_sample(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"sample_id": "x-1", "conversation": {"speaker_a": "A"}}]))
    env = {**base_env(tmp_path), "ANIMA_ENGINE": "offline"}
    result = invoke_cli(["eval", "locomo", str(bad)], env)
    assert result.returncode == 2
    assert "sample x-1" in result.stderr + result.stdout and "speaker_b" in result.stderr + result.stdout


# ---- LongMemEval: a synthetic file in the published shape (written for this project) -------

LME_FIXTURE = Path(__file__).parents[1] / "data" / "longmemeval_tiny.json"
LME_ANSWERS = {  # question -> (the answer model's answer, the judge's label)
    "What breed is the dog I adopted?": ("A whippet", "CORRECT"),
    "Which city do I work in now?": ("Utrecht", "WRONG"),
}


def lme_model(body: dict[str, Any]) -> dict[str, Any] | None:
    return answer_or_judge(body, "user", LME_ANSWERS) or sleep_autopilot(body)


def test_eval_longmemeval_prints_j_per_question_type_against_the_fake_api(
    db_url: str, tmp_path: Path
) -> None:
    report = tmp_path / "lme.json"
    env = {**base_env(tmp_path), "ANIMA_ENGINE": "anthropic", "ANTHROPIC_API_KEY": KEY}
    with FakeMessagesAPI(min_cache_tokens=None, responder=lme_model) as fake:
        env["ANTHROPIC_BASE_URL"] = fake.url
        result = invoke_cli(
            ["eval", "longmemeval", str(LME_FIXTURE), "--database-url", db_url, "--report", str(report)], env
        )
        bodies = fake.messages
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "J per question type" in out and KEY not in out
    data = json.loads(report.read_text())
    assert data["benchmark"] == "longmemeval" and data["samples"] == [
        "syn_user_01",
        "syn_update_02",
        "syn_abs_03_abs",
    ]
    j = {r["name"]: (r["questions"], r["J"]) for r in data["j_by_category"]}
    assert j["single-session-user"] == (1, 1.0) and j["knowledge-update"] == (1, 0.0)
    assert j["overall 1-6"] == (2, 0.5)  # the abstention question is not judged
    # each question asked at its question_date, from its own haystack only
    answers = [b for b in bodies if isinstance(b.get("system"), str) and b["system"].startswith("You answer")]
    asked = {json.dumps(b["messages"], ensure_ascii=False) for b in answers}
    assert any("as of 2024-03-20" in a and "whippet" in a and "Rotterdam" not in a for a in asked), asked


def test_eval_longmemeval_offline_runs_end_to_end_on_the_synthetic_sample(
    db_url: str, tmp_path: Path
) -> None:
    report = tmp_path / "lme-offline.json"
    env = {**base_env(tmp_path), "ANIMA_ENGINE": "offline"}
    result = invoke_cli(
        ["eval", "longmemeval", str(LME_FIXTURE), "--database-url", db_url, "--report", str(report)], env
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "offline context measure" in out
    data = json.loads(report.read_text())
    overall = next(r for r in data["keyword_coverage"] if r["category"] == 0)
    assert overall["questions"] == 2 and overall["name"] == "overall 1-6"
    found = {q["question"]: q["keywords_found"] for q in data["questions"]}
    assert found["What breed is the dog I adopted?"]  # "whippet" is in its haystack
    # a question type the file does not have scores "-", not NaN; rows are named by type only
    table = result.stdout.splitlines()
    header = next(line for line in table if "question type" in line)
    assert "category" not in header and "NaN" not in result.stdout
    row = next(line.split() for line in table if line.strip().startswith("multi-session"))
    assert row == ["multi-session", "0", "0", "-"], row
    assert "(-: no question of that kind in the file)" in result.stdout


def test_eval_longmemeval_names_the_bad_question(tmp_path: Path) -> None:
    item = json.loads(LME_FIXTURE.read_text())[0]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{**item, "haystack_dates": ["20 March 2024"] * 2}]))
    result = invoke_cli(["eval", "longmemeval", str(bad)], {**base_env(tmp_path), "ANIMA_ENGINE": "offline"})
    out = result.stdout + result.stderr
    assert result.returncode == 2 and "question syn_user_01" in out and "2023/05/20 (Sat) 02:21" in out, out

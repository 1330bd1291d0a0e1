"""The user-facing end: `anima demo` on a real store, then `anima export --markdown` and
`anima recall` on what it learned."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.memory.workspace import export_markdown
from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.recall.resident import resident_set
from anima_pipeline.store.db import Database
from anima_pipeline_tests.conftest import cli_env, invoke_cli


@pytest.fixture
def demo_env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path, db_url)


def test_demo_then_export_and_recall(demo_env: dict[str, str], db: Database, tmp_path: Path) -> None:
    result = invoke_cli(["demo"], demo_env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for heading in (
        "nights",
        "semantic memories of aria",
        "emotional anchors",
        "autobiographical narratives",
        "temporal summaries",
        "resident set",
        "dg dev",
    ):
        assert heading in out, heading
    # the demo's last table is `anima status`'s, with why it shows 13 of the 14 conversations
    assert "1 conversation(s) deleted by the night's cleanup are not counted" in " ".join(out.split())
    totals = json.loads(invoke_cli(["status", "--json"], demo_env).stdout)["totals"]
    # 197 imported; cleanup deleted the stale single-message conversation (kept in memory_event)
    assert totals["messages"] == 196 and totals["conversations"] == 13 and totals["semantic_active"] > 20
    assert totals["temporal_summaries"] >= 7 and totals["emotional_anchors"] > 0
    # the nights are in Dagster's run history under DAGSTER_HOME
    assert any((tmp_path / "dagster").rglob("*.db"))

    # running the demo again changes nothing: the import is idempotent and every night is done
    again = invoke_cli(["demo"], demo_env)
    assert again.returncode == 0
    assert json.loads(invoke_cli(["status", "--json"], demo_env).stdout)["totals"] == totals
    # ... and says so: the nights are "already done", not "done" by a run that had 0 animas
    assert "already done" in again.stdout and "8 already done by an earlier run" in again.stdout
    assert not re.search(r"│ 2026-11-\d\d │ done ", again.stdout), again.stdout
    # status explains why it counts one conversation fewer than the import reported
    shown = invoke_cli(["status"], demo_env).stdout
    assert "1 conversation(s) deleted by the night's cleanup are not counted" in shown

    # export: MEMORY.md with ids and sources, one file per day with its summary, bank pages
    exported = invoke_cli(["export", "--markdown", str(tmp_path / "md")], demo_env)
    assert exported.returncode == 0, exported.stderr
    memory_md = (tmp_path / "md" / "MEMORY.md").read_text(encoding="utf-8")
    assert "**f-" in memory_md and "sources: aria:2026-11-1" in memory_md
    day = (tmp_path / "md" / "memory" / "2026-11-18.md").read_text(encoding="utf-8")
    assert "## Summary" in day and "## Memory changes" in day
    assert list((tmp_path / "md" / "bank").rglob("*.md"))

    # recall: the resident set first, then memories matching the query, never a deprecated one
    with db.transaction() as conn:
        res = assemble_context(conn, "aria", "Mochi cat", settings=Settings())
        recalled = res.section("memories").items
        assert any("Mochi" in i.text for i in [*res.section("resident").items, *recalled])
        statuses = conn.execute(
            "SELECT DISTINCT status FROM semantic_memory WHERE id = ANY(%s)", ([i.id for i in recalled],)
        ).fetchall()
        assert [r["status"] for r in statuses] in ([], ["active"])
        resident, overflow = resident_set(conn, "aria")
        assert overflow == 0 and {m.id for m in resident}.isdisjoint({i.id for i in recalled})
    cli = invoke_cli(["recall", "Mochi", "--anima", "aria", "--json"], demo_env)
    assert cli.returncode == 0 and json.loads(cli.stdout)["anima_id"] == "aria"


def test_export_refuses_an_unknownrun_cli(db: Database, tmp_path: Path) -> None:
    with db.transaction() as conn, pytest.raises(ValueError, match="unknown anima"):
        export_markdown(conn, tmp_path, ["nobody"])


def test_export_to_a_file_or_an_unmakeable_folder_is_one_line_naming_the_path(
    demo_env: dict[str, str], tmp_path: Path
) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    in_the_way = tmp_path / "out"
    (in_the_way / "memory").parent.mkdir()
    (in_the_way / "memory").write_text("a file where export puts a folder")
    week = Path(__file__).parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"
    assert invoke_cli(["import", str(week)], demo_env).returncode == 0
    for path, says in (
        (a_file, "is a file, not a folder"),
        (a_file / "sub", "cannot create the folder"),
        (Path("/proc/anima-export"), "cannot create the folder"),  # unwritable even for root
        (in_the_way, "cannot write"),
    ):
        done = invoke_cli(["export", "--markdown", str(path)], demo_env)
        assert done.returncode == 2, done.stdout + done.stderr
        [line] = done.stderr.strip().splitlines()
        assert f"--markdown {path}" in line and says in line and "a folder you can write to" in line, line
    assert a_file.read_text() == "mine"


def test_sleep_refuses_bad_days_and_steps_before_running(demo_env: dict[str, str]) -> None:
    future = invoke_cli(["sleep", "--day", "2999-01-01"], demo_env)
    assert future.returncode == 2 and "not over yet" in future.stderr
    unknown = invoke_cli(["sleep", "--day", "2026-11-18", "--step", "semantic_memory/nope"], demo_env)
    assert (
        unknown.returncode == 2
        and "unknown step" in unknown.stderr
        and "semantic_memory/merged" in unknown.stderr
    )
    backwards = invoke_cli(["sleep", "--from", "2026-11-20", "--to", "2026-11-18"], demo_env)
    assert backwards.returncode == 2 and "before" in backwards.stderr

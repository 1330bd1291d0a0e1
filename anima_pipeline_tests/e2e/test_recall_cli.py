"""`anima recall` against a real store: the sections as text, as JSON with their characters,
and the batch form (questions in, JSON lines out) with a bad line named before anything runs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anima_pipeline import cli
from anima_pipeline.config import get_settings
from anima_pipeline.store.db import Database


@pytest.fixture
def run(db_url: str, db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    monkeypatch.setenv("ANIMA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ANIMA_DATABASE_URL", db_url)
    get_settings.cache_clear()
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO conversation (id, anima_id, title, created_at, updated_at)
               VALUES ('aria:c1', 'aria', 'tea talk', '2024-05-03T12:00:00Z', '2024-05-03T12:00:00Z')"""
        )
        conn.execute(
            """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at)
               VALUES ('aria', 'aria:c1', '1', 'user', 'Lin Wei', 'I brewed oolong tea with my grandmother.',
                       '2024-05-03T12:00:00Z')"""
        )
        conn.execute(
            """INSERT INTO semantic_memory (anima_id, type, content, pinned) VALUES
               ('aria', 'preference', 'Lin Wei prefers oolong tea to coffee.', false),
               ('aria', 'world', 'Lin Wei lives in Hangzhou.', true)"""
        )
    runner = CliRunner()
    yield lambda *args, **kw: runner.invoke(cli.app, list(args), **kw)
    get_settings.cache_clear()


def test_recall_json_lists_the_sections_with_their_characters(run) -> None:
    result = run("recall", "What tea does Lin Wei like?", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    sections = {s["name"]: s for s in data["sections"]}
    assert list(sections) == ["resident", "summaries", "memories", "episodic"]
    for s in sections.values():
        # each line's newline counts, and with the first item the header and the blank line before it
        overhead = len(s["items"]) + len(s["title"]) + 4 if s["items"] else 0
        assert s["chars_used"] == sum(i["chars"] for i in s["items"]) + overhead <= s["budget"]
    assert [i["text"] for i in sections["resident"]["items"]] == ["Lin Wei lives in Hangzhou."]
    (memory,) = sections["memories"]["items"]
    assert memory["ref"].startswith("f-") and memory["score"] > 0 and memory["type"] == "preference"
    (message,) = sections["episodic"]["items"]
    assert (
        message["speaker"] == "Lin Wei" and message["title"] == "tea talk" and message["date"] == "2024-05-03"
    )
    assert data["chars"] == len(data["rendered"])


def test_recall_text_shows_each_section_and_its_use(run) -> None:
    result = run("recall", "oolong", "--budget", "1000")
    assert result.exit_code == 0, result.output
    assert re.search(r"# Recalled memories \(\d+/\d+ chars\)", result.stdout)
    assert "# Past messages" in result.stdout and "[2024-05-03 Lin Wei" in result.stdout


def test_recall_batch_prints_one_json_line_per_question(run, tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        'What tea?\n{"id": "q2", "question": "Where does Lin Wei live?", "session": "aria:c1"}\n',
        encoding="utf-8",
    )
    result = run("recall", "--batch", str(batch))
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["query"] for line in lines] == ["What tea?", "Where does Lin Wei live?"]
    assert lines[1]["id"] == "q2" and lines[1]["session_id"] == "aria:c1"
    episodic = next(s for s in lines[1]["sections"] if s["name"] == "episodic")
    assert episodic["items"] == []  # the session's own messages are left out


def test_a_bad_batch_line_is_named_and_nothing_runs(run, tmp_path: Path) -> None:
    batch = tmp_path / "q.jsonl"
    batch.write_text('What tea?\n{"question": "x", "limit": 3}\n', encoding="utf-8")
    result = run("recall", "--batch", str(batch))
    assert result.exit_code == 2 and f"{batch}:2" in result.output and "limit" in result.output
    assert not any(line.startswith("{") for line in result.output.splitlines())  # no question ran
    both = run("recall", "tea", "--batch", str(batch))
    assert both.exit_code == 2 and "either a QUERY or --batch" in both.output


def test_message_reads_one_past_message_whole_or_in_parts_and_refuses_a_bad_id(run, db: Database) -> None:
    with db.transaction() as conn:
        mid = conn.execute("SELECT id FROM message WHERE anima_id = 'aria'").fetchone()["id"]
    text = "I brewed oolong tea with my grandmother."
    shown = run("message", f"m-{mid}")
    assert shown.exit_code == 0, shown.output
    head, body = shown.stdout.split("\n", 1)
    assert head.startswith(f"m-{mid} | 2024-05-03") and head.endswith(
        f'| Lin Wei in "tea talk" | characters 0-{len(text)} of {len(text)}'
    )
    assert body.strip() == text
    part = run("message", str(mid), "--offset", "10", "--limit", "6", "--json")
    assert part.exit_code == 0, part.output
    data = json.loads(part.stdout)
    assert (data["id"], data["content"], data["next_offset"], data["total_chars"]) == (
        f"m-{mid}",
        text[10:16],
        16,
        len(text),
    )
    for args, named in (
        (["f-1"], "id"),  # a memory's id is no message's
        ([f"m-{mid}", "--limit", "0"], "limit"),
        ([f"m-{mid}", "--offset", str(len(text))], "offset"),
    ):
        refused = run("message", *args)
        assert refused.exit_code == 2 and named in refused.stderr, (args, refused.output)
    unknown = run("message", "m-999999999")
    assert unknown.exit_code == 2 and "m-999999999 does not exist" in unknown.stderr, unknown.output


def test_recall_names_a_message_it_shows_in_part_and_message_reads_it_whole(run, db: Database) -> None:
    whole_lines = run("recall", "Where did the oolong come from?")  # every line whole: no note
    assert whole_lines.exit_code == 0 and "anima message" not in whole_lines.stdout, whole_lines.output
    long = (
        "We talked about the kettle and the weather. " * 20
        + "The oolong came from Anxi. "
        + "More of it. " * 40
    )
    with db.transaction() as conn:
        mid = conn.execute(
            """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at)
               VALUES ('aria', 'aria:c1', '2', 'user', 'Lin Wei', %s, '2024-05-03T12:05:00Z') RETURNING id""",
            (long,),
        ).fetchone()["id"]
    shown = run("recall", "Where did the oolong come from?")
    assert shown.exit_code == 0, shown.output
    note = shown.stdout.rstrip().splitlines()[-1]
    assert note.startswith(
        "(… marks a past message shown in part; `anima message` with its ref reads it whole: "
    )
    assert f"m-{mid} [2024-05-03 Lin Wei]" in note
    whole = run("message", f"m-{mid}", "--json")
    assert whole.exit_code == 0 and json.loads(whole.stdout)["content"] == long

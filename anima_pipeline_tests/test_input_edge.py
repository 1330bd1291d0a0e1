"""Input validation at the edge (issue 11, item 5): timestamps in a sane window, bounded safe
ids, a message size limit, nested JSON, conflicting re-imports (refused, or audited with
--update), unknown animas refused by sleep and recall, a garbage ANIMA_DATABASE_URL named, and
export folders that never collide. All through the real CLI in-process and a real PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anima_pipeline import cli
from anima_pipeline.config import get_settings
from anima_pipeline.store.db import Database


def line(anima: str = "ana", conv: str = "c1", n: int = 1, **extra) -> dict:
    return {
        "anima_id": anima,
        "conversation_id": conv,
        "message_id": f"{conv}:{n:03d}",
        "role": "user" if n % 2 else "assistant",
        "content": f"message {n} of {conv}",
        "created_at": f"2024-03-01T10:{n:02d}:00+08:00",
        **extra,
    }


def write(path: Path, rows: list[dict | str]) -> Path:
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def anima(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str) -> Iterator:
    """anima(*args, **env): the CLI in-process against the test database."""
    monkeypatch.setenv("ANIMA_HOME", str(tmp_path / "anima_home"))
    monkeypatch.setenv("ANIMA_DATABASE_URL", db_url)
    runner = CliRunner()

    def run(*args: str, **env: str):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        get_settings.cache_clear()
        return runner.invoke(cli.app, list(args))

    yield run
    get_settings.cache_clear()


def counts(db: Database) -> tuple[int, int]:
    with db.transaction() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM message) AS m, (SELECT count(*) FROM conversation) AS c"
        ).fetchone()
    return row["m"], row["c"]


def test_the_extreme_timestamp_line_is_refused_at_import_with_file_line_and_field(
    anima, db: Database, tmp_path: Path
) -> None:
    path = write(tmp_path / "a.jsonl", [line(n=1), line(n=2, created_at="0001-01-01T00:00:00+14:00")])
    result = anima("import", str(path))
    assert result.exit_code == 1
    assert f"{path}:2: field 'created_at'" in result.output and "1970-2200" in result.output
    assert counts(db) == (0, 0)  # nothing of the file was written
    late = write(tmp_path / "b.jsonl", [line(n=1, created_at="2300-01-01T00:00:00Z")])
    assert anima("import", str(late)).exit_code == 1
    # the window is a setting
    assert anima("import", str(late), ANIMA_TIMESTAMP_MAX_YEAR="2400").exit_code == 0


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (line(anima="x" * 20_000), "field 'anima_id': Value error, is 20,000 characters long (at most 64)"),
        (line(anima="../etc"), "field 'anima_id': Value error, may hold only letters"),
        (line(conv="a b"), "field 'conversation_id': Value error, must not contain whitespace"),
        (line(content="x" * 300_001), "above the limit of 256,000 (ANIMA_MAX_MESSAGE_CHARS)"),
        (
            line(metadata=json.loads('{"a":' * 40 + "1" + "}" * 40)),
            "field 'metadata': Value error, is nested",
        ),
        ('{"anima_id": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested too deeply to read"),
    ],
    ids=[
        "long-anima-id",
        "path-anima-id",
        "space-in-conversation-id",
        "oversize-message",
        "deep-metadata",
        "deep-json",
    ],
)
def test_bad_ids_oversize_messages_and_deep_json_are_named_errors(
    anima, db: Database, tmp_path: Path, row, expected: str
) -> None:
    path = write(tmp_path / "a.jsonl", [line(n=1), row])
    result = anima("import", str(path))
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    assert f"{path}:2: " in result.output and expected in result.output.replace("\n", "")
    assert counts(db) == (0, 0)


def test_a_changed_message_or_debug_flag_is_a_conflict_unless_update(
    anima, db: Database, tmp_path: Path
) -> None:
    assert anima("import", str(write(tmp_path / "a.jsonl", [line(n=1), line(n=2)]))).exit_code == 0
    changed = write(tmp_path / "b.jsonl", [line(n=1), line(n=2, content="something else")])
    refused = anima("import", str(changed))
    assert refused.exit_code == 1
    assert f"{changed}:2: field 'content': message_id 'c1:002' is already stored" in refused.output
    flipped = write(tmp_path / "c.jsonl", [line(n=3, debug=True)])
    refused = anima("import", str(flipped))
    assert refused.exit_code == 1 and f"{flipped}:1: field 'debug'" in refused.output
    with db.transaction() as conn:
        assert conn.execute("SELECT content FROM message WHERE external_id = 'c1:002'").fetchone()[
            "content"
        ] == ("message 2 of c1")

    applied = anima("import", "--update", str(changed), str(flipped))
    assert applied.exit_code == 0, applied.output
    assert "updated 1 message(s), 1 debug flag(s)" in applied.output
    with db.transaction() as conn:
        assert conn.execute("SELECT content FROM message WHERE external_id = 'c1:002'").fetchone()[
            "content"
        ] == ("something else")
        assert conn.execute("SELECT debug FROM conversation WHERE id = 'c1'").fetchone()["debug"] is True
        ops = {
            (r["table_name"], r["op"])
            for r in conn.execute("SELECT table_name, op FROM memory_event WHERE op = 'update'").fetchall()
        }
    assert ops == {("message", "update"), ("conversation", "update")}
    # the same lines again are no conflict any more
    assert anima("import", str(changed), str(flipped)).exit_code == 0


def test_sleep_and_recall_refuse_an_unknown_anima(anima, tmp_path: Path) -> None:
    assert anima("import", str(write(tmp_path / "a.jsonl", [line(n=1)]))).exit_code == 0
    slept = anima("sleep", "--day", "2024-03-01", "--anima", "nobody", DAGSTER_HOME=str(tmp_path / "dg"))
    assert slept.exit_code == 2 and "unknown anima(s): nobody; known: ana" in slept.output
    recalled = anima("recall", "anything", "--anima", "nobody")
    assert recalled.exit_code == 2 and "unknown anima(s): nobody" in recalled.output
    huge = anima("recall", "anything", "--anima", "x" * 20_000)
    assert huge.exit_code == 2 and "20,000 characters long" in huge.output


def test_a_garbage_database_url_is_a_named_error_without_the_url(anima) -> None:
    result = anima("status", ANIMA_DATABASE_URL="garbage://user:hunter2@@@::nowhere")
    assert result.exit_code == 2
    assert "ANIMA_DATABASE_URL=(hidden): not a PostgreSQL connection URL" in result.output
    assert "hunter2" not in result.output


def test_export_gives_animas_differing_by_case_their_own_folders(anima, tmp_path: Path) -> None:
    rows = [line(anima=a, conv=f"{a}-c", n=1) for a in ("kai", "Kai", "KAI", "k.ai")]
    assert anima("import", str(write(tmp_path / "a.jsonl", rows))).exit_code == 0
    out = tmp_path / "export"
    result = anima("export", "--markdown", str(out))
    assert result.exit_code == 0, result.output
    folders = sorted(p.name for p in out.iterdir())
    assert len(folders) == 4 and len({f.casefold() for f in folders}) == 4
    assert "kai" in folders and "k.ai" in folders
    titles = {(out / f / "MEMORY.md").read_text(encoding="utf-8").splitlines()[0] for f in folders}
    assert titles == {"# MEMORY — kai", "# MEMORY — Kai", "# MEMORY — KAI", "# MEMORY — k.ai"}


def test_anima_revert_refuses_a_second_revert_of_the_same_run(anima, db: Database, tmp_path: Path) -> None:
    assert anima("import", str(write(tmp_path / "a.jsonl", [line(n=1), line(n=2)]))).exit_code == 0
    with db.transaction() as conn:
        run = conn.execute("SELECT DISTINCT run_id FROM memory_event WHERE step = 'import'").fetchone()[
            "run_id"
        ]
    first = anima("revert", "--run", run)
    assert first.exit_code == 0, first.output
    revert_id = first.output.split(" as ")[1].split(":")[0]
    second = anima("revert", "--run", run)
    assert second.exit_code == 2
    assert f"run '{run}' was already reverted by {revert_id}" in second.output.replace("\n", "")


def test_the_facade_refuses_a_resent_message_id_with_other_content(db: Database) -> None:
    from anima_pipeline.memory import AnimaInputError, AnimaMemory

    memory = AnimaMemory(db, "ana")
    msg = {k: v for k, v in line(n=1).items() if k != "anima_id"}
    assert memory.append([msg]).added == 1
    assert memory.append([msg]).added == 0  # the same turn re-sent: idempotent
    with pytest.raises(AnimaInputError) as exc:
        memory.append([{**msg, "content": "edited afterwards"}])
    assert exc.value.field == "messages[0].content" and exc.value.message_id == "c1:001"
    with db.transaction() as conn:
        assert conn.execute("SELECT content FROM message").fetchone()["content"] == "message 1 of c1"

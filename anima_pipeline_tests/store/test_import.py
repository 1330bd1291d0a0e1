"""Importing conversation archives (JSONL) into a real PostgreSQL: the API (`parse_lines` +
`import_records` in one transaction) and `anima import`. A bad line anywhere aborts the whole
import, names file:line and the field, and leaves the store exactly as it was."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from anima_pipeline import cli
from anima_pipeline.config import get_settings
from anima_pipeline.store.archive import ArchiveError, ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline_tests.conftest import shared_file

SAMPLE = cli.SAMPLE  # the bundled synthetic week


# ---------------------------------------------------------------- helpers


def rec(conv: str = "c1", n: int = 1, *, anima: str = "ana", minute: int | None = None, **extra: Any) -> dict:
    """One valid archive line as a dict; `extra` overrides or adds keys."""
    base = {
        "anima_id": anima,
        "conversation_id": conv,
        "message_id": f"{conv}:{n:03d}",
        "role": "user" if n % 2 else "assistant",
        "speaker": "Lin" if n % 2 else "Ana",
        "content": f"message {n} of {conv}",
        "created_at": f"2024-03-01T10:{(n if minute is None else minute):02d}:00+08:00",
    }
    base.update(extra)
    return base


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def good_rows() -> list[dict]:
    """Two animas, three conversations, seven messages."""
    return [
        rec("c1", 1),
        rec("c1", 2),
        rec("c1", 3),
        rec("c2", 1, platform="cron", title="Nightly digest", debug=True),
        rec("c2", 2),
        rec("b1", 1, anima="bob", metadata={"source": "test", "tags": ["x"]}),
        rec("b1", 2, anima="bob"),
    ]


def import_files(db: Database, *paths: Path) -> ImportStats:
    stats = ImportStats()
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="test-import", step="import")
        for path in paths:
            import_records(
                conn, parse_lines(path.read_text(encoding="utf-8").split("\n"), str(path)), audit, stats
            )
            stats.files += 1
    return stats


def counts(db: Database) -> dict[str, int]:
    with db.transaction() as conn:
        return {
            t: conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"]
            for t in ("conversation", "message", "memory_event")
        }


def snapshot(db: Database) -> tuple[list[dict], list[dict]]:
    with db.transaction() as conn:
        convs = conn.execute("SELECT * FROM conversation ORDER BY anima_id, id").fetchall()
        msgs = conn.execute("SELECT * FROM message ORDER BY id").fetchall()
    return convs, msgs


def squash(text: str) -> str:
    """Rich wraps stdout at the console width (80 when not a terminal): compare without whitespace."""
    return re.sub(r"\s+", "", text)


@pytest.fixture
def run_cli(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """`anima ...` in-process against the test database (settings are cached per process)."""
    monkeypatch.setenv("ANIMA_DATABASE_URL", db_url)
    monkeypatch.setenv("ANIMA_HOME", str(tmp_path / "anima_home"))
    get_settings.cache_clear()
    runner = CliRunner()

    def run(*args: str, input: str | bytes | None = None):
        return runner.invoke(cli.app, list(args), input=input)

    yield run
    get_settings.cache_clear()


# ---------------------------------------------------------------- the API


def test_a_good_file_is_imported(db: Database, tmp_path: Path) -> None:
    rows = good_rows()
    stats = import_files(db, write_jsonl(tmp_path / "good.jsonl", rows))
    assert (stats.lines, stats.messages_added, stats.conversations_added) == (7, 7, 3)
    assert stats.animas == {"ana", "bob"}
    assert counts(db)["conversation"] == 3 and counts(db)["message"] == 7

    with db.transaction() as conn:
        stored = conn.execute(
            "SELECT anima_id, conversation_id, external_id, role, speaker, content, created_at, metadata "
            "FROM message ORDER BY id"
        ).fetchall()
    assert [
        (m["anima_id"], m["conversation_id"], m["external_id"], m["role"], m["speaker"], m["content"])
        for m in stored
    ] == [
        (r["anima_id"], r["conversation_id"], r["message_id"], r["role"], r["speaker"], r["content"])
        for r in rows
    ]
    assert [m["created_at"] for m in stored] == [datetime.fromisoformat(r["created_at"]) for r in rows]
    assert stored[5]["metadata"] == {"source": "test", "tags": ["x"]}
    assert stored[0]["metadata"] == {}


def test_each_new_conversation_is_audited(db: Database, tmp_path: Path) -> None:
    import_files(db, write_jsonl(tmp_path / "good.jsonl", good_rows()))
    with db.transaction() as conn:
        events = conn.execute(
            "SELECT anima_id, table_name, memory_id, op, after FROM memory_event ORDER BY id"
        ).fetchall()
    assert [(e["anima_id"], e["table_name"], e["memory_id"], e["op"]) for e in events] == [
        ("ana", "conversation", "c1", "import"),
        ("ana", "conversation", "c2", "import"),
        ("bob", "conversation", "b1", "import"),
        ("", "store_calendar", "first_message_at", "move"),  # the store's first day, in the same transaction
    ]
    assert events[1]["after"] == {"platform": "cron", "title": "Nightly digest", "debug": True}


def test_a_duplicate_import_changes_nothing(db: Database, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "good.jsonl", good_rows())
    import_files(db, path)
    before, before_counts = snapshot(db), counts(db)

    again = import_files(db, path, path)
    assert (again.messages_added, again.conversations_added, again.lines) == (0, 0, 14)
    assert snapshot(db) == before
    assert counts(db) == before_counts


def test_a_repeated_line_within_one_file_is_imported_once(db: Database, tmp_path: Path) -> None:
    stats = import_files(db, write_jsonl(tmp_path / "dup.jsonl", [rec("c1", 1), rec("c1", 1), rec("c1", 2)]))
    assert stats.messages_added == 2
    assert counts(db)["message"] == 2


def test_conversation_times_are_the_min_and_max_of_its_messages(db: Database, tmp_path: Path) -> None:
    # lines out of order, one in another offset
    rows = [
        rec("c1", 2, minute=30),
        rec("c1", 1, minute=5),
        rec("c1", 3, created_at="2024-03-01T03:50:00+00:00"),  # 11:50 +08:00, the latest
        rec("c1", 4, minute=20),
    ]
    import_files(db, write_jsonl(tmp_path / "a.jsonl", rows))
    with db.transaction() as conn:
        conv = conn.execute("SELECT created_at, updated_at FROM conversation WHERE id = 'c1'").fetchone()
    assert conv["created_at"] == datetime.fromisoformat("2024-03-01T10:05:00+08:00")
    assert conv["updated_at"] == datetime.fromisoformat("2024-03-01T11:50:00+08:00")

    # a later archive extends the conversation at both ends
    import_files(
        db,
        write_jsonl(
            tmp_path / "b.jsonl",
            [rec("c1", 9, created_at="2024-03-02T08:00:00+08:00"), rec("c1", 8, minute=1)],
        ),
    )
    with db.transaction() as conn:
        conv = conn.execute("SELECT created_at, updated_at FROM conversation WHERE id = 'c1'").fetchone()
        span = conn.execute("SELECT min(created_at) AS lo, max(created_at) AS hi FROM message").fetchone()
    assert (conv["created_at"], conv["updated_at"]) == (span["lo"], span["hi"])
    assert conv["updated_at"] == datetime.fromisoformat("2024-03-02T08:00:00+08:00")


def test_platform_title_and_debug_are_kept(db: Database, tmp_path: Path) -> None:
    rows = [
        rec("cron1", 1, platform="cron", title="Nightly digest", debug=True),
        rec("cron1", 2),  # lines without the optional keys do not erase them
        rec("late", 1),
        rec("late", 2, title="Named later", platform="telegram"),
        rec("plain", 1),
    ]
    import_files(db, write_jsonl(tmp_path / "a.jsonl", rows))
    # re-importing without the optional keys keeps them too
    import_files(db, write_jsonl(tmp_path / "b.jsonl", [rec("cron1", 3)]))
    with db.transaction() as conn:
        convs = {
            r["id"]: (r["platform"], r["title"], r["debug"])
            for r in conn.execute("SELECT id, platform, title, debug FROM conversation").fetchall()
        }
    assert convs == {
        "cron1": ("cron", "Nightly digest", True),
        "late": ("telegram", "Named later", False),
        "plain": ("chat", None, False),
    }


def test_unknown_keys_are_ignored_and_optional_keys_may_be_null(db: Database, tmp_path: Path) -> None:
    rows = [
        rec("c1", 1, extra_key="whatever", platform=None, title=None, debug=None, metadata=None, speaker=None)
    ]
    stats = import_files(db, write_jsonl(tmp_path / "a.jsonl", rows))
    assert stats.messages_added == 1
    with db.transaction() as conn:
        m = conn.execute("SELECT speaker, metadata FROM message").fetchone()
    assert m == {"speaker": None, "metadata": {}}


def test_one_conversation_id_in_two_animas_is_two_conversations(db: Database, tmp_path: Path) -> None:
    rows = [rec("same", 1, anima="ana"), rec("same", 1, anima="bob")]
    stats = import_files(db, write_jsonl(tmp_path / "a.jsonl", rows))
    assert (stats.conversations_added, stats.messages_added) == (2, 2)


def test_blank_lines_are_skipped_and_line_numbers_stay_true(tmp_path: Path) -> None:
    lines = ["", json.dumps(rec("c1", 1)), "   ", json.dumps(rec("c1", 2)), "{broken"]
    with pytest.raises(ArchiveError, match=r"^f\.jsonl:5: broken JSON"):
        list(parse_lines(lines, "f.jsonl"))
    assert len(list(parse_lines(lines[:4], "f.jsonl"))) == 2


def test_unicode_content_round_trips(db: Database, tmp_path: Path) -> None:
    # U+2028 and U+0085 may stand unescaped inside a JSON string; so may any non-ASCII text
    content = "我今天去了外滩 \u2028 next\u0085line 🌙 [shares a photo: a cat]"
    path = write_jsonl(tmp_path / "u.jsonl", [rec("c1", 1, content=content)])
    import_files(db, path)
    with db.transaction() as conn:
        assert conn.execute("SELECT content FROM message").fetchone()["content"] == content


# ---------------------------------------------------------------- bad lines

BAD_LINES: list[tuple[str, str, str]] = [
    # (id, the bad line, what the message must say besides file:line)
    ("broken-json", '{"anima_id": "ana", "conversation_id": "c1",', "broken JSON"),
    ("truncated-json", json.dumps(rec("c9", 1))[:-10], "broken JSON"),
    ("non-object-array", json.dumps([rec("c9", 1)]), "JSON object"),
    ("non-object-string", '"just text"', "JSON object"),
    ("non-object-number", "42", "JSON object"),
    ("non-object-null", "null", "JSON object"),
    *[
        (
            f"missing-{f}",
            json.dumps({k: v for k, v in rec("c9", 1).items() if k != f}),
            f"field '{f}': required field is missing",
        )
        for f in ("anima_id", "conversation_id", "message_id", "role", "content", "created_at")
    ],
    *[
        (f"empty-{f}", json.dumps(rec("c9", 1, **{f: ""})), f"field '{f}': required field is empty")
        for f in ("anima_id", "conversation_id", "message_id", "content")
    ],
    (
        "blank-content",
        json.dumps(rec("c9", 1, content="  \t ")),
        "field 'content': must not be blank",
    ),
    ("blank-anima", json.dumps(rec("c9", 1, anima_id="   ")), "field 'anima_id'"),
    ("null-content", json.dumps(rec("c9", 1, content=None)), "field 'content'"),
    ("number-content", json.dumps(rec("c9", 1, content=5)), "field 'content'"),
    ("unknown-role", json.dumps(rec("c9", 1, role="bot")), "field 'role'"),
    ("role-wrong-case", json.dumps(rec("c9", 1, role="User")), "field 'role'"),
    (
        "timestamp-no-offset",
        json.dumps(rec("c9", 1, created_at="2024-03-01T10:01:00")),
        "field 'created_at': timestamp '2024-03-01T10:01:00' has no UTC offset",
    ),
    ("date-only", json.dumps(rec("c9", 1, created_at="2024-03-01")), "field 'created_at'"),
    (
        "timestamp-garbage",
        json.dumps(rec("c9", 1, created_at="yesterday")),
        "field 'created_at': not an ISO-8601 timestamp",
    ),
    ("timestamp-number", json.dumps(rec("c9", 1, created_at=1709258460)), "field 'created_at'"),
    (
        "nul-in-content",
        json.dumps(rec("c9", 1, content="a\u0000b")),
        "field 'content': contains a NUL",
    ),
    ("nul-in-metadata", json.dumps(rec("c9", 1, metadata={"k": "a\u0000b"})), "field 'metadata'"),
    ("metadata-not-object", json.dumps(rec("c9", 1, metadata=[1, 2])), "field 'metadata'"),
]


@pytest.mark.parametrize(
    ("line", "expected"), [(b[1], b[2]) for b in BAD_LINES], ids=[b[0] for b in BAD_LINES]
)
def test_a_bad_line_is_named_with_file_line_and_field(line: str, expected: str) -> None:
    lines = [json.dumps(rec("c1", 1)), "", json.dumps(rec("c1", 2)), line, json.dumps(rec("c1", 4))]
    with pytest.raises(ArchiveError) as info:
        list(parse_lines(lines, "some/dir/day.jsonl"))
    message = str(info.value)
    assert message.startswith("some/dir/day.jsonl:4: "), message
    assert expected in message, message


def test_no_bad_line_leaves_a_trace_even_after_good_lines_and_files(db: Database, tmp_path: Path) -> None:
    """Each bad line, after good lines of a second file and after a whole good first file:
    nothing of either file is written. (One database for all cases: a clone per case is slow.)"""
    import_files(db, write_jsonl(tmp_path / "base.jsonl", good_rows()))  # the store is not empty
    before, before_counts = snapshot(db), counts(db)
    first = write_jsonl(tmp_path / "first.jsonl", [rec("n1", 1), rec("n1", 2), rec("n2", 1, anima="new")])
    for case, line, expected in BAD_LINES:
        second = write_jsonl(
            tmp_path / f"second-{case}.jsonl", [rec("n3", 1), rec("n3", 2), line, rec("n3", 4)]
        )
        with pytest.raises(ArchiveError) as info:
            import_files(db, first, second)
        message = str(info.value)
        assert message.startswith(f"{second}:3: ") and expected in message, (case, message)
        assert counts(db) == before_counts, case
    assert snapshot(db) == before


# ---------------------------------------------------------------- anima import


def test_cli_imports_several_files_in_one_call(run_cli, db: Database, tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", good_rows()[:5])
    b = write_jsonl(tmp_path / "b.jsonl", good_rows()[5:])
    result = run_cli("import", str(a), str(b))
    assert result.exit_code == 0, result.output
    summary = "imported 2 file(s), 7 line(s): 7 new message(s), 3 new conversation(s), 2 anima(s)"
    assert squash(summary) in squash(result.stdout)
    assert counts(db)["message"] == 7 and counts(db)["conversation"] == 3

    again = run_cli("import", str(a), str(b))
    assert again.exit_code == 0, again.output
    assert "0newmessage(s),0newconversation(s)" in squash(again.stdout)
    assert counts(db)["message"] == 7


def test_cli_import_says_new_messages_wait_for_vectors(
    run_cli, db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A night embeds memories only, so an import names the command that gives its messages
    vectors; with no embedder there is nothing to say."""
    path = write_jsonl(tmp_path / "a.jsonl", good_rows())
    monkeypatch.setenv("ANIMA_EMBEDDER", "local")
    get_settings.cache_clear()
    first = run_cli("import", str(path))
    assert first.exit_code == 0, first.output
    assert "7 new message(s) have no vectors yet: `anima embed --kind message`" in " ".join(
        first.stdout.split()
    )
    again = run_cli("import", str(path))  # nothing new: no line
    assert "no vectors yet" not in again.stdout
    monkeypatch.setenv("ANIMA_EMBEDDER", "none")
    get_settings.cache_clear()
    other = write_jsonl(
        tmp_path / "b.jsonl", [{**r, "message_id": f"x{i}"} for i, r in enumerate(good_rows())]
    )
    lexical = run_cli("import", str(other))
    assert lexical.exit_code == 0, lexical.output
    assert "new message(s)" in lexical.stdout and "no vectors yet" not in lexical.stdout


def test_cli_reads_standard_input(run_cli, db: Database) -> None:
    text = "\n".join(json.dumps(r) for r in good_rows()) + "\n"
    result = run_cli("import", "-", input=text)
    assert result.exit_code == 0, result.output
    assert counts(db)["message"] == 7


def test_cli_mixes_standard_input_and_files(run_cli, db: Database, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", good_rows()[:3])
    text = "\n".join(json.dumps(r) for r in good_rows()[3:])  # no final newline
    result = run_cli("import", str(path), "-", input=text)
    assert result.exit_code == 0, result.output
    assert counts(db)["message"] == 7


def test_cli_bad_line_on_standard_input_is_named(run_cli, db: Database) -> None:
    text = json.dumps(rec("c1", 1)) + "\n" + json.dumps(rec("c1", 2, role="robot")) + "\n"
    result = run_cli("import", "-", input=text)
    assert result.exit_code == 1
    assert "<stdin>:2:field'role'" in squash(result.stderr)
    assert counts(db)["message"] == 0


CLI_CASES = {
    "broken-json",
    "non-object-array",
    "missing-content",
    "empty-message_id",
    "blank-content",
    "unknown-role",
    "timestamp-no-offset",
    "nul-in-content",
}


def test_cli_bad_line_exits_non_zero_and_writes_nothing(run_cli, db: Database, tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "first.jsonl", good_rows())
    assert CLI_CASES <= {b[0] for b in BAD_LINES}
    for case, line, expected in [b for b in BAD_LINES if b[0] in CLI_CASES]:
        second = write_jsonl(tmp_path / f"second-{case}.jsonl", [rec("n3", 1), line])
        result = run_cli("import", str(first), str(second))
        assert result.exit_code == 1, (case, result.output)
        assert "nothing written" in result.stderr, (case, result.stderr)
        assert f"{second}:2: " in result.stderr, (case, result.stderr)  # one line, not wrapped
        assert squash(expected) in squash(result.stderr), (case, result.stderr)
        assert counts(db) == {"conversation": 0, "message": 0, "memory_event": 0}, case


def test_cli_missing_file_is_refused(run_cli, db: Database, tmp_path: Path) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", good_rows())
    result = run_cli("import", str(good), str(tmp_path / "nope.jsonl"))
    assert result.exit_code == 1
    assert "nope.jsonl:nosuchfile" in squash(result.stderr)
    assert counts(db)["message"] == 0


def test_cli_file_names_are_not_read_as_markup(run_cli, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "week[red].jsonl", [rec("c1", 1), "[1]"])
    result = run_cli("import", str(path))
    assert result.exit_code == 1
    assert "week[red].jsonl:2:" in squash(result.stderr), result.stderr


def test_cli_text_that_is_not_utf8_is_a_named_bad_line(run_cli, db: Database, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        (
            json.dumps(rec("c1", 1))
            + "\n"
            + json.dumps(rec("c1", 2, content="café"), ensure_ascii=False)
            + "\n"
        ).encode("latin-1")
    )
    result = run_cli("import", str(path))
    assert result.exit_code == 1
    assert f"{path}:2:notUTF-8" in squash(result.stderr), result.stderr
    assert counts(db)["message"] == 0


def test_cli_accepts_crlf_a_byte_order_mark_and_unicode_line_separators(
    run_cli, db: Database, tmp_path: Path
) -> None:
    rows = [rec("c1", 1, content="one\u2028two"), rec("c1", 2, content="three\u0085four")]
    path = tmp_path / "windows.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + "\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode() + b"\r\n"
    )
    result = run_cli("import", str(path))
    assert result.exit_code == 0, result.output
    with db.transaction() as conn:
        assert [r["content"] for r in conn.execute("SELECT content FROM message ORDER BY id")] == [
            "one\u2028two",
            "three\u0085four",
        ]


def test_cli_imports_the_bundled_sample_week(run_cli, db: Database) -> None:
    if not SAMPLE.exists():
        pytest.skip(f"no bundled sample at {SAMPLE}")
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    messages = {(r["anima_id"], r["conversation_id"], r["message_id"]) for r in rows}
    conversations = {(r["anima_id"], r["conversation_id"]) for r in rows}

    result = run_cli("import", str(SAMPLE))
    assert result.exit_code == 0, result.output
    assert counts(db)["message"] == len(messages)
    assert counts(db)["conversation"] == len(conversations)
    before = snapshot(db)

    again = run_cli("import", str(SAMPLE))
    assert again.exit_code == 0, again.output
    assert snapshot(db) == before


# ---------------------------------------------------------------- LoCoMo dev archive (../shared)


def broken_copy(archive: Path, tmp_path: Path) -> Path:
    """The archive with line 100 cut in half, in tmp_path (the data never enters the repository)."""
    lines = archive.read_text(encoding="utf-8").split("\n")
    lines[99] = lines[99][: len(lines[99]) // 2]
    broken = tmp_path / "dev.broken.archive.jsonl"
    broken.write_text("\n".join(lines), encoding="utf-8")
    return broken


def test_locomo_dev_archive_imports_and_reimports(run_cli, db: Database, tmp_path: Path) -> None:
    archive = shared_file("locomo", "dev.archive.jsonl")
    result = run_cli("import", str(archive))
    assert result.exit_code == 0, result.output
    totals = counts(db)
    assert (totals["message"], totals["conversation"]) == (2080, 99)
    assert "2080newmessage(s),99newconversation(s),4anima(s)" in squash(result.stdout)
    imported = snapshot(db)

    again = run_cli("import", str(archive))
    assert again.exit_code == 0, again.output
    assert "0newmessage(s),0newconversation(s)" in squash(again.stdout)
    assert counts(db) == totals
    assert snapshot(db) == imported

    broken = run_cli("import", str(broken_copy(archive, tmp_path)))
    assert broken.exit_code != 0
    assert counts(db) == totals
    assert snapshot(db) == imported


def test_locomo_dev_archive_with_line_100_broken_writes_nothing(
    run_cli, db: Database, tmp_path: Path
) -> None:
    broken = broken_copy(shared_file("locomo", "dev.archive.jsonl"), tmp_path)
    before = counts(db)
    result = run_cli("import", str(broken))
    assert result.exit_code != 0
    assert f"{broken}:100: broken JSON" in result.stderr, result.stderr
    assert counts(db) == before == {"conversation": 0, "message": 0, "memory_event": 0}

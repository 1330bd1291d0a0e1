"""The CLI as a first-time user meets it: errors name the option and the format, flags show as
flags, the commands come in the order of use, and each --help says everything it takes."""

from __future__ import annotations

from pathlib import Path

from anima_pipeline_tests.conftest import cli_env, invoke_cli


def test_a_wrong_date_names_the_option_and_the_format(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    for args, option in (
        (["sleep", "--day", "2026-13-01"], "--day"),
        (["sleep", "--from", "28.11.2026", "--to", "2026-11-30"], "--from"),
        (["sleep", "--from", "2026-11-28", "--to", "tomorrow"], "--to"),
        # the basic ISO form, which Python's date.fromisoformat takes: one form at every door
        (["sleep", "--day", "20261128"], "--day"),
    ):
        refused = invoke_cli(args, env)
        assert refused.returncode == 2, refused.stderr
        assert f"{option}: expected a day as YYYY-MM-DD" in refused.stderr, refused.stderr
        assert "Invalid isoformat" not in refused.stderr


def test_help_shows_flags_as_flags_and_commands_in_the_order_of_use(tmp_path: Path) -> None:
    env = {**cli_env(tmp_path), "COLUMNS": "120"}
    sleep_help = invoke_cli(["sleep", "--help"], env).stdout
    assert "--force " in sleep_help and "<bool>" not in sleep_help
    assert "--day YYYY-MM-DD" in sleep_help
    top = invoke_cli(["--help"], env).stdout
    commands = [line.split()[0] for line in top.split("Commands:")[1].splitlines() if line.strip()]
    first_steps = ["demo", "import", "sleep", "status", "recall", "export"]
    assert [c for c in commands if c in first_steps] == first_steps and commands[0] == "demo", commands
    assert commands.index("serve") < commands.index("mcp") < commands.index("keys"), commands
    mcp_help = invoke_cli(["mcp", "--help"], env).stdout
    for tool in ("context", "search_messages", "read_message", "remember", "working_context", "--new"):
        assert tool in mcp_help, tool

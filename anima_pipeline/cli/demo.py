"""`anima demo`: the whole cycle on the bundled synthetic week."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import console, open_store, settings
from anima_pipeline.cli.sleep import run_sleep, sleep_table
from anima_pipeline.cli.store import import_, print_status, status_data

SAMPLE = Path(__file__).resolve().parents[1] / "sample" / "week.archive.jsonl"


@app.command("demo")
def demo() -> None:
    """The whole cycle on the bundled synthetic week: import it into the embedded default (or
    ANIMA_DATABASE_URL), sleep its nights through Dagster with the offline engine, and show
    what was learned."""
    from datetime import date

    from anima_pipeline.definitions import checkout
    from anima_pipeline.llm.factory import engine_class
    from anima_pipeline.night.registry import day_range

    if engine_class(settings()).priced:
        console.print("note: the demo uses the engine in ANIMA_ENGINE; unset it for the offline engine")
    import_([str(SAMPLE)])
    days = day_range(date(2026, 11, 16), date(2026, 11, 23))
    rows = run_sleep(days)
    console.print(sleep_table(rows))
    db = open_store()
    try:
        with db.transaction() as conn:
            show_learned(conn, "aria")
            data = status_data(conn)
    finally:
        db.close()
    print_status(data)  # with what it does not count, as `anima status` prints it
    anima = "anima" if checkout() is None else ".venv/bin/anima"
    console.print(
        "\nOpen the Dagster UI on the same run history:\n"
        f"  {dagster_ui_command()}\n"
        f"Export the store as Markdown:  {anima} export --markdown ./anima-export\n"
        f'Ask it something:             {anima} recall "what does Lin Wei like to eat?"',
        soft_wrap=True,
    )


def dagster_ui_command() -> str:
    """How to open the UI on the CLI's run history, with DAGSTER_HOME set: Dagster itself then
    keeps nothing in a temporary folder of the current one (site-packages for a wheel, and its
    "Using temporary directory" is not where the runs are). The default home ($ANIMA_HOME/dagster)
    gets a link to the instance template (defs/instance.py `link_template`); a home of the
    user's without a dagster.yaml is told to link it. In the checkout `dg dev`, for a wheel
    `dagster dev -w` on the package's workspace.yaml (the code location named as dg.toml says)."""
    import os

    from anima_pipeline.definitions import checkout
    from anima_pipeline.defs.instance import DAGSTER_YAML_PATH, dagster_home, link_template

    root = checkout()
    home = dagster_home()
    ui = (
        f"cd {root} && . .venv/bin/activate && DAGSTER_HOME={home} dg dev"
        if root
        else f"DAGSTER_HOME={home} dagster dev -w {DAGSTER_YAML_PATH.parent / 'workspace.yaml'}"
    )
    if os.environ.get("DAGSTER_HOME"):  # the user's own home: theirs to configure
        if (home / "dagster.yaml").exists():
            return ui
        return f'{ui}   (first: ln -s "{DAGSTER_YAML_PATH}" "{home}/", the instance template)'
    if link_template(home):
        return ui
    return f'{ui}   (first: cp "{DAGSTER_YAML_PATH}" "{home}/", the instance template)'


def show_learned(conn, anima_id: str) -> None:
    from anima_pipeline.recall.resident import resident_set
    from anima_pipeline.store.layers import AnchorRepo, AutobiographyRepo, SelfBlockRepo, TemporalRepo
    from anima_pipeline.store.memories import MemoryRepo

    mems = MemoryRepo(conn).active(anima_id)
    _print_table(
        f"semantic memories of {anima_id} ({len(mems)} active; the newest 15)",
        ("id", "type", "content", "sources"),
        (
            (m.ref, m.type, escape(m.content), ", ".join(s.split(":")[-1] for s in m.source_sessions))
            for m in sorted(mems, key=lambda m: m.id)[-15:]
        ),
    )
    anchors = AnchorRepo(conn).timeline(anima_id)
    _print_table(
        f"emotional anchors ({len(anchors)})",
        ("when", "emotion", "valence", "trigger"),
        (
            (
                f"{a['occurred_at']:%m-%d %H:%M}",
                a["emotion"],
                f"{a['valence']:+.1f}",
                escape(a["trigger"] or ""),
            )
            for a in anchors
        ),
    )
    _print_table(
        "autobiographical narratives",
        ("id", "significance", "title"),
        (
            (f"a-{n['id']}", n["significance"], escape(n["title"]))
            for n in AutobiographyRepo(conn).active(anima_id)
        ),
    )
    summaries = TemporalRepo(conn).all(anima_id)
    _print_table(
        f"temporal summaries ({len(summaries)})",
        ("level", "period", "summary (start)"),
        (
            (r["level"], str(r["period_start"]), escape(r["content"][:160].replace("\n", " ")))
            for r in summaries
        ),
    )
    resident, overflow = resident_set(conn, anima_id)
    console.print(f"[bold]resident set[/bold] ({len(resident)} memories, pinned ∪ most cited):")
    for m in resident:
        console.print(f"  {m.ref} {'📌 ' if m.pinned else ''}{escape(m.content)}", highlight=False)
    blocks = SelfBlockRepo(conn).all(anima_id)
    if blocks["autobiography_summary"]:
        console.print("[bold]self block autobiography_summary:[/bold]")
        console.print(escape(blocks["autobiography_summary"]), highlight=False)
    if not blocks["identity"].strip():  # the one block no night fills: say why, not an empty block
        from anima_pipeline.core.types import IDENTITY_UNSET

        console.print(
            f"[bold]self block identity:[/bold] not set; {escape(IDENTITY_UNSET.replace(' A ', f' {anima_id} '))}",
            soft_wrap=True,
        )


def _print_table(title: str, columns: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> None:
    """A table whose long cells fold instead of being cut."""
    t = Table(title=title)
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*row)
    console.print(t)

"""The Dagster UI in a real browser, on the demo store: run it by hand (CI skips it).

Installs what it needs when missing (Playwright 1.65 from PyPI into this venv, Debian's
chromium with apt-get), runs `anima demo` into a fresh ANIMA_HOME / DAGSTER_HOME, starts
`dg dev` on it (its own process group, stopped by id), and opens in headless chromium:

1. the asset graph (the night's groups) and the light_sleep group's steps,
2. temporal_summaries/day's partition page for a demo day (the day summary as Markdown),
3. the demo's run page (a run of nightly_sleep, with Re-execute available).

Saves a screenshot of each, and fails on a page error (an uncaught exception in the page),
on a page that does not show what it should, or on a warning in `dg dev`'s log.

    .venv/bin/python -m benchmarks.browser_check [--out browser-check]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from testkit.dagster_dev import dagster_dev, dev_env

PLAYWRIGHT = "playwright==1.65.2"
CHROMIUM = "/usr/bin/chromium"
DAY = "2026-11-18"


def ensure_tools() -> None:
    if importlib.util.find_spec("playwright") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", PLAYWRIGHT], check=True)
    if not Path(CHROMIUM).exists():
        apt = shutil.which("apt-get")
        if apt is None:
            raise SystemExit(f"{CHROMIUM} is missing and there is no apt-get to install Debian's chromium")
        subprocess.run([apt, "update"], check=True)
        subprocess.run([apt, "install", "-y", "chromium"], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("browser-check"), help="where the screenshots go")
    args = parser.parse_args()
    ensure_tools()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="anima-browser-") as tmp:
        root = Path(tmp)
        env = dev_env(root / "home", root / "dagster")
        env.pop("ANIMA_DATABASE_URL", None)  # the demo's own embedded store
        demo = subprocess.run(
            [sys.executable, "-m", "anima_pipeline.cli", "demo"], env=env, capture_output=True, text=True
        )
        if demo.returncode != 0:
            raise SystemExit(f"anima demo failed:\n{demo.stdout[-2000:]}\n{demo.stderr[-2000:]}")
        run_id, summary = demo_facts(env)
        log = root / "dev.log"
        with dagster_dev(env, log) as url:
            problems = browse(url, run_id, summary, args.out)
        warnings = [line for line in log.read_text().splitlines() if "warning" in line.lower()]
        problems += [f"dg dev log: {w}" for w in warnings]
        subprocess.run(
            [sys.executable, "-m", "anima_pipeline.cli", "db", "stop"], env=env, capture_output=True
        )
    for p in sorted(args.out.glob("*.png")):
        print(f"screenshot: {p}")
    if problems:
        print("\n".join(f"FAIL {p}" for p in problems))
        raise SystemExit(1)
    print("browser check passed: asset graph, partition page with the day summary, run page with Re-execute")


def demo_facts(env: dict[str, str]) -> tuple[str, str]:
    """The demo's Dagster run id and the first line of DAY's summary, from the stores."""
    import os

    os.environ.update(DAGSTER_HOME=env["DAGSTER_HOME"], ANIMA_HOME=env["ANIMA_HOME"])
    import dagster as dg

    from anima_pipeline.config import Settings
    from anima_pipeline.defs.instance import get_instance
    from anima_pipeline.store.db import open_database

    with get_instance() as instance:
        [run] = instance.get_runs(filters=dg.RunsFilter(job_name="nightly_sleep"), limit=1)
    db = open_database(Settings())
    try:
        with db.transaction() as conn:
            row = conn.execute(
                "SELECT content FROM temporal_summary WHERE level = 'day' AND period_start = %s", (DAY,)
            ).fetchone()
    finally:
        db.close()
    return run.run_id, row["content"].strip().splitlines()[0]


def browse(url: str, run_id: str, summary: str, out: Path) -> list[str]:
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    pages = [
        ("asset-graph", f"{url}/asset-groups", ["light_sleep", "deep_sleep", "temporal"]),
        (
            "light-sleep-group",
            f"{url}/locations/anima_pipeline/asset-groups/light_sleep",
            ["extracted", "narrated", "autobiography_summary"],
        ),
        (
            "partition",
            f"{url}/assets/temporal_summaries/day?view=partitions&partition={DAY}",
            [DAY, summary[:40]],
        ),
        ("run", f"{url}/runs/{run_id}", ["nightly_sleep", "Re-execute"]),
    ]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        for name, address, expected in pages:
            page.goto(address, wait_until="networkidle", timeout=120_000)
            skip = page.get_by_role("button", name="Skip")  # the first-visit newsletter dialog
            if skip.count():
                skip.first.click()
            page.wait_for_timeout(3000)  # the graph lays itself out after the data arrives
            if name == "partition":
                page.get_by_text("[Show Markdown]").first.click()
                page.wait_for_timeout(1000)
            text = page.inner_text("body")
            for want in expected:
                if want not in text:
                    problems.append(f"{name}: {want!r} not on {address}")
            if name == "run":
                button = page.get_by_role("button", name="Re-execute all")
                if button.count() == 0 and page.get_by_text("Re-execute").count() == 0:
                    problems.append("run: no Re-execute button")
                elif button.count() and button.first.is_disabled():
                    problems.append("run: Re-execute all is disabled")
            page.screenshot(path=str(out / f"{name}.png"), full_page=False)
            if name == "partition":
                page.keyboard.press("Escape")
        problems += [f"page error: {e}" for e in errors]
        browser.close()
    return problems


if __name__ == "__main__":
    main()

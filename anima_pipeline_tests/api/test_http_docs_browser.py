"""/docs and /redoc of `anima serve` with the network off: Swagger UI and ReDoc come from the
installed fastapi-offline package, not a CDN. Over HTTP, every address /redoc's page and bundle
load is this server's; in a real browser (headless Debian chromium through Playwright, skipped
where /usr/bin/chromium is absent: `apt-get install -y chromium`) nothing leaves the machine."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx2 as httpx
import pytest

from anima_pipeline.config import Settings
from anima_pipeline.service.http.app import create_app
from anima_pipeline.store.db import Database
from testkit.live_server import serving

CHROMIUM = Path("/usr/bin/chromium")


def test_redoc_loads_no_cdn_address(db: Database, db_url: str, tmp_path: Path) -> None:
    with serving(create_app(db, Settings(database_url=db_url, home=tmp_path))) as base:
        page = httpx.get(f"{base}/redoc")
        assert page.status_code == 200 and "https://" not in page.text, page.text
        [script] = [s for s in page.text.split('"') if s.endswith("redoc.standalone.js")]
        bundle = httpx.get(f"{base}{script}")
    assert bundle.status_code == 200 and "javascript" in bundle.headers["content-type"]
    assert len(bundle.content) > 500_000  # ReDoc itself, not a stub
    # the footer's "API docs by Redocly" logo was https://cdn.redoc.ly/redoc/logo-mini.svg
    assert b"cdn.redoc.ly" not in bundle.content and b"logo-mini.svg" not in bundle.content


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install -y chromium)")
def test_docs_and_redoc_render_with_the_network_off(db: Database, db_url: str, tmp_path: Path) -> None:
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    outside: list[tuple[str, str]] = []

    def local_only(route) -> None:  # the network is off: anything not on this machine fails
        if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append((route.request.resource_type, route.request.url))
            route.abort("internetdisconnected")

    with (
        serving(create_app(db, Settings(database_url=db_url, home=tmp_path))) as base,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.route("**/*", local_only)

            page.goto(f"{base}/docs")
            page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)  # the operations, drawn
            assert "anima memory" in page.inner_text(".swagger-ui .info")
            assert (
                page.locator(".opblock-summary-path", has_text="/v1/animas/{anima_id}/context").count() == 1
            )

            page.goto(f"{base}/redoc")
            page.locator("h2", has_text="Chat-time context for a query").wait_for(timeout=20_000)
            assert errors == []
        finally:
            browser.close()
    # nothing was asked of the internet, not even ReDoc's "API docs by Redocly" logo
    assert outside == []

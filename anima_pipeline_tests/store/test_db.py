"""Opening the store: a pool over the embedded default fails at once once the operator stopped
its server (`anima db stop`), where it would wait its whole timeout for a server that is not
started again."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from anima_pipeline.store import embedded
from anima_pipeline.store.db import POOL_TIMEOUT_S, Database


def test_a_transaction_after_db_stop_fails_at_once_and_one_after_a_restart_works(
    db_url: str, tmp_path: Path
) -> None:
    with Database(db_url, max_size=1, home=tmp_path) as db:
        with db.transaction() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
        # what `anima db stop` run by another process leaves (its pid first); no server runs here
        (tmp_path / embedded.STOPPED).write_text("1 stopped the server\n")
        t = time.monotonic()
        with pytest.raises(embedded.StoppedUnderfoot) as caught, db.transaction():
            pytest.fail("no connection is handed out once the operator stopped the server")
        assert time.monotonic() - t < POOL_TIMEOUT_S / 10
        # a lost connection to whatever handles one (the night's retry rules, recording a failure)
        assert isinstance(caught.value, psycopg.OperationalError)
        assert "anima db stop" in str(caught.value) and str(embedded.pgdata_dir(tmp_path)) in str(
            caught.value
        )
        # the next command starts the server again and removes the marker
        (tmp_path / embedded.STOPPED).unlink()
        with db.transaction() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}


def test_a_pool_over_a_server_ignores_the_embedded_marker(db_url: str, tmp_path: Path) -> None:
    """ANIMA_DATABASE_URL names a server the operator runs: no home, no marker read."""
    (tmp_path / embedded.STOPPED).write_text("1 stopped the server\n")
    with Database(db_url, max_size=1) as db, db.transaction() as conn:
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}

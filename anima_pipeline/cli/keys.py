"""`anima keys create / list / revoke`: the per-anima API keys of `anima serve`."""

from __future__ import annotations

import uuid

import typer
from rich.table import Table

from anima_pipeline.cli.app import HELP, app
from anima_pipeline.cli.common import (
    NEW_ANIMA_HELP,
    anima_ids,
    console,
    err_console,
    fail,
    open_store,
    require_anima_or_new,
)

keys_app = typer.Typer(help="API keys for `anima serve`: one anima per key, stored hashed.", **HELP)
app.add_typer(keys_app, name="keys")


def _audit(conn, step: str):
    from anima_pipeline.store.events import Audit

    return Audit(conn=conn, anima_id="", run_id=f"keys-{uuid.uuid4().hex[:12]}", step=step)


@keys_app.command("create")
def create(
    anima: str = typer.Option(..., "--anima", help="The anima this key reads and writes (only this one)."),
    name: str | None = typer.Option(None, "--name", help="A label to tell keys apart in `anima keys list`."),
    new: bool = typer.Option(False, "--new", help=NEW_ANIMA_HELP),
) -> None:
    """Create a key and print it on its own line. It is shown only now: only its hash is stored.
    An anima the store does not know is refused (exit 2, naming the known ones) unless --new."""
    from anima_pipeline.core.validation import Name, check
    from anima_pipeline.store.api_keys import create_key

    if not anima.strip():
        fail("--anima must not be blank", 2)
    require_anima_or_new(anima, new)
    if name is not None:
        check(Name, name, "--name")
    db = open_store()
    try:
        with db.transaction() as conn:
            key, stored = create_key(conn, _audit(conn, "keys/create"), anima, name)
    finally:
        db.close()
    err_console.print(
        f"API key {stored.id} for anima {anima!r} (shown once; send as Authorization: Bearer KEY):"
    )
    print(key)


@keys_app.command("list")
def list_(
    anima: str | None = typer.Option(None, "--anima", callback=anima_ids, help="Only this anima's keys."),
) -> None:
    """Keys by id, anima, name, first characters, created and revoked times (never the key)."""
    from anima_pipeline.store.api_keys import list_keys

    db = open_store()
    try:
        with db.transaction() as conn:
            keys = list_keys(conn, anima)
    finally:
        db.close()
    table = Table(title="API keys")
    for col in ("id", "anima", "name", "starts with", "created", "revoked"):
        table.add_column(col)
    for k in keys:
        table.add_row(
            str(k.id),
            k.anima_id,
            k.name or "",
            k.prefix + "…",
            f"{k.created_at:%Y-%m-%d %H:%M}",
            f"{k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "",
        )
    console.print(table)


@keys_app.command("revoke")
def revoke(key_id: int = typer.Argument(..., help="The key's id from `anima keys list`.")) -> None:
    """Revoke a key: requests with it get 401 from now on. The row stays (audited), never deleted."""
    from anima_pipeline.store.api_keys import revoke_key

    db = open_store()
    try:
        with db.transaction() as conn:
            key = revoke_key(conn, _audit(conn, "keys/revoke"), key_id)
    finally:
        db.close()
    console.print(f"revoked key {key.id} ({key.prefix}…) of anima {key.anima_id}")

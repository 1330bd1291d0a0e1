"""Per-anima API keys for the HTTP service: created once, stored as a hash, revoked, never deleted.

A key is 32 random bytes (url-safe base64) behind the prefix ``anima_``; with that much entropy a
plain SHA-256 is the right hash (a slow password hash buys nothing against a key nobody can guess),
and it lets a request find its key with one indexed lookup. Creating and revoking are audited.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from pydantic import BaseModel

from anima_pipeline.core.errors import NotFound
from anima_pipeline.core.validation import AnimaId, Name, check
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit

KEY_PREFIX = "anima_"
_SHOWN = 12  # characters of the key kept in clear for `anima keys list`


class ApiKey(BaseModel):
    id: int
    anima_id: str
    name: str | None
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(conn: Connection, audit: Audit, anima_id: str, name: str | None = None) -> tuple[str, ApiKey]:
    """A new key for `anima_id`: (the key, shown to the caller once; its stored row). An id the
    other doors would refuse (validation.AnimaId) is refused here too: InputError."""
    check(AnimaId, anima_id, "anima_id")
    if name is not None:
        check(Name, name, "name")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = conn.execute(
        """INSERT INTO api_key (anima_id, name, prefix, key_hash) VALUES (%s, %s, %s, %s)
           RETURNING id, anima_id, name, prefix, created_at, revoked_at""",
        (anima_id, name, key[:_SHOWN], hash_key(key)),
    ).fetchone()
    stored = ApiKey.model_validate(row)
    audit.for_anima(anima_id).record(
        "api_key", stored.id, "create", None, {"prefix": stored.prefix, "name": name}
    )
    return key, stored


def list_keys(conn: Connection, anima_id: str | None = None) -> list[ApiKey]:
    rows = conn.execute(
        """SELECT id, anima_id, name, prefix, created_at, revoked_at FROM api_key
           WHERE %(a)s::text IS NULL OR anima_id = %(a)s ORDER BY anima_id, id""",
        {"a": anima_id},
    ).fetchall()
    return [ApiKey.model_validate(r) for r in rows]


def revoke_key(conn: Connection, audit: Audit, key_id: int) -> ApiKey:
    """Revoke by id; a revoked key stays listed (revoked_at set). Raises LookupError for an unknown id."""
    row = conn.execute(
        """UPDATE api_key SET revoked_at = COALESCE(revoked_at, now()) WHERE id = %s
           RETURNING id, anima_id, name, prefix, created_at, revoked_at""",
        (key_id,),
    ).fetchone()
    if row is None:
        raise NotFound("API key", str(key_id), field="key_id")
    key = ApiKey.model_validate(row)
    audit.for_anima(key.anima_id).record(
        "api_key", key.id, "revoke", {"prefix": key.prefix}, {"revoked_at": key.revoked_at}
    )
    return key


def anima_of_key(conn: Connection, key: str) -> str | None:
    """The anima a live key belongs to; None for an unknown or revoked key."""
    row = conn.execute(
        "SELECT anima_id FROM api_key WHERE key_hash = %s AND revoked_at IS NULL", (hash_key(key),)
    ).fetchone()
    return row["anima_id"] if row else None

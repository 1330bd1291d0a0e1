"""Which animas the store knows: the check every `--anima` option makes.

Apart from the archive's import (store/archive.py, where they were) so that a read-only
command (`anima recall`, `anima status`) checks its --anima without loading the archive's
models.
"""

from __future__ import annotations

from collections.abc import Iterable

from anima_pipeline.core.errors import InputError
from anima_pipeline.core.validation import anima_id_problem
from anima_pipeline.store.db import Connection


class UnknownAnima(InputError):
    """An anima id the store has nothing of (no conversation, no memory)."""


def known_animas(conn: Connection, limit: int | None = None) -> list[str]:
    """Every anima with a conversation or a memory, sorted (the first `limit` when given)."""
    rows = conn.execute(
        "SELECT anima_id FROM conversation UNION SELECT anima_id FROM semantic_memory ORDER BY 1 LIMIT %s",
        (limit,),
    ).fetchall()
    return [r["anima_id"] for r in rows]


def require_animas(conn: Connection, animas: Iterable[str]) -> None:
    """Raise UnknownAnima naming every id of `animas` that is malformed or unknown."""
    wanted = list(dict.fromkeys(animas))
    for a in wanted:
        problem = anima_id_problem(a)
        if problem:
            shown = a if len(a) <= 80 else a[:40] + "…"
            raise UnknownAnima(f"--anima {shown!r}: an anima id {problem}")
    rows = conn.execute(
        """SELECT a FROM unnest(%s::text[]) AS a
           WHERE NOT EXISTS (SELECT 1 FROM conversation c WHERE c.anima_id = a)
             AND NOT EXISTS (SELECT 1 FROM semantic_memory m WHERE m.anima_id = a)""",
        (wanted,),
    ).fetchall()
    missing = [r["a"] for r in rows]
    if missing:
        known = known_animas(conn, limit=21)
        more = ", …" if len(known) > 20 else ""
        raise UnknownAnima(
            f"unknown anima(s): {', '.join(missing)}; known: {', '.join(known[:20]) or 'none'}{more}"
        )

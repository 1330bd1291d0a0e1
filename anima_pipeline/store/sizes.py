"""How big each anima's night will be, in characters, read with a few aggregate queries
(no row is loaded): what `anima sleep --estimate` and the budget guard price before anything
is sent (night/estimate.py, docs/cost.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel

from anima_pipeline.store.db import Connection


class NightSizes(BaseModel):
    """One anima's inputs for one night."""

    anima_id: str
    conversations: int = 0
    messages: int = 0
    message_chars: int = 0  # user and assistant text of the day (what light sleep reads)
    speaker_chars: int = 0
    memories: int = 0  # active semantic memories
    memory_chars: int = 0
    recent_experiences: int = 0  # experience / imprint memories of the last 7 days
    recent_experience_chars: int = 0
    narratives: int = 0
    self_block_chars: int = 0
    resident: int = 0  # the top-20 resident memories every identity context carries
    resident_chars: int = 0


def night_sizes(
    conn: Connection, animas: Sequence[str], start: datetime, end: datetime
) -> dict[str, NightSizes]:
    """Per anima of `animas`, the sizes of the night [start, end)."""
    out = {a: NightSizes(anima_id=a) for a in animas}
    if not out:
        return out
    ids = list(out)
    for r in conn.execute(
        """SELECT m.anima_id, count(DISTINCT m.conversation_id) AS conversations, count(*) AS messages,
                  coalesce(sum(length(m.content)), 0) AS message_chars,
                  coalesce(sum(length(coalesce(m.speaker, ''))), 0) AS speaker_chars
           FROM message m JOIN conversation c ON c.anima_id = m.anima_id AND c.id = m.conversation_id
           WHERE m.anima_id = ANY(%s) AND m.created_at >= %s AND m.created_at < %s
             AND c.platform <> 'cron' AND NOT c.debug AND m.role IN ('user', 'assistant')
           GROUP BY m.anima_id""",
        (ids, start, end),
    ).fetchall():
        out[r["anima_id"]] = out[r["anima_id"]].model_copy(
            update={k: int(v) for k, v in r.items() if k != "anima_id"}
        )
    since = start - timedelta(days=6)
    for r in conn.execute(
        """SELECT anima_id, count(*) AS memories, coalesce(sum(length(content)), 0) AS memory_chars,
                  count(*) FILTER (WHERE type IN ('experience', 'imprint') AND observed_at >= %s
                                   AND observed_at < %s) AS recent_experiences,
                  coalesce(sum(length(content)) FILTER (WHERE type IN ('experience', 'imprint')
                                   AND observed_at >= %s AND observed_at < %s), 0) AS recent_experience_chars
           FROM semantic_memory WHERE anima_id = ANY(%s) AND status = 'active' GROUP BY anima_id""",
        (since, end, since, end, ids),
    ).fetchall():
        out[r["anima_id"]] = out[r["anima_id"]].model_copy(
            update={k: int(v) for k, v in r.items() if k != "anima_id"}
        )
    for r in conn.execute(
        """SELECT anima_id, count(*) AS narratives FROM autobiographical_memory
           WHERE anima_id = ANY(%s) AND status = 'active' GROUP BY anima_id""",
        (ids,),
    ).fetchall():
        out[r["anima_id"]].narratives = int(r["narratives"])
    for r in conn.execute(
        "SELECT anima_id, coalesce(sum(length(content)), 0) AS n FROM self_block WHERE anima_id = ANY(%s) GROUP BY anima_id",
        (ids,),
    ).fetchall():
        out[r["anima_id"]].self_block_chars = int(r["n"])
    for r in conn.execute(
        """SELECT anima_id, count(*) AS resident, coalesce(sum(length(content)), 0) AS n FROM (
               SELECT anima_id, content, row_number() OVER (PARTITION BY anima_id
                      ORDER BY pinned DESC, reference_count DESC, id) AS rank
               FROM semantic_memory
               WHERE anima_id = ANY(%s) AND status = 'active' AND (pinned OR reference_count > 0)) r
           WHERE rank <= 20 GROUP BY anima_id""",
        (ids,),
    ).fetchall():
        out[r["anima_id"]].resident = int(r["resident"])
        out[r["anima_id"]].resident_chars = int(r["n"])
    return out

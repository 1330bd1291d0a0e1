"""Entity neighbours (recall/neighbours.py, docs/benchmarks.md "Entity neighbours"): the names
the first hits hold, the rows naming them read through the index (a name in too many rows or
common by the statistics links nothing, the name as written, the hits and the resident set left
out), and those rows placed in their part of the budget when `recall.neighbours` is on, on a
real store."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.recall import neighbours
from anima_pipeline.recall.assemble import assemble_context, first_stage
from anima_pipeline.recall.neighbours import hit_names, name_query
from anima_pipeline.recall.render import memory_item
from anima_pipeline.store import recall_queries as queries
from anima_pipeline.store.db import Database

A = "aria"
NOW = datetime(2024, 6, 20, 12, tzinfo=UTC)
LEXICAL = Settings(embedder={"kind": "none"}, recall={"neighbours": False})
WITH = Settings(embedder={"kind": "none"}, recall={"neighbours": True})


def _add(conn, content: str, *, anima: str = A, pinned: bool = False) -> int:
    return conn.execute(
        """INSERT INTO semantic_memory (anima_id, type, content, source_sessions, pinned)
           VALUES (%s, 'world', %s, ARRAY['aria:s1'], %s) RETURNING id""",
        (anima, content, pinned),
    ).fetchone()["id"]


def _say(conn, content: str, *, conv: str = "aria:c1", debug: bool = False) -> int:
    at = datetime(2024, 5, 3, 12, tzinfo=UTC)
    conn.execute(
        """INSERT INTO conversation (id, anima_id, title, debug, created_at, updated_at)
           VALUES (%s, %s, 'chat', %s, %s, %s) ON CONFLICT DO NOTHING""",
        (conv, A, debug, at, at),
    )
    n = conn.execute("SELECT count(*) AS n FROM message").fetchone()["n"]
    return conn.execute(
        """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at)
           VALUES (%s, %s, %s, 'user', 'Noor', %s, %s) RETURNING id""",
        (A, conv, f"x{n}", content, at),
    ).fetchone()["id"]


def _item(id_: int, content: str):
    row = {"id": id_, "type": "world", "content": content, "source_sessions": [], "pinned": False}
    return memory_item(row, score=0, why="matched x", tz=UTC)


# --- names -------------------------------------------------------------------------------


def test_hit_names_leave_out_the_question_and_untrusted_sentence_starts() -> None:
    hits = [
        _item(1, "Noor grew up near Malmo and misses the Oresund Bridge."),
        _item(2, "Thanks! Noor said Malmo winters are dark."),  # "Thanks" only ever starts a sentence
        _item(3, "Running every morning keeps Noor calm."),
    ]
    assert hit_names("Where did Noor grow up?", hits) == ["Malmo", "Oresund Bridge"]
    assert hit_names("Where did Noor grow up?", hits, limit=1) == ["Malmo"]
    # a name sharing one word with the question is the question's own
    assert hit_names("Did Noor cross the bridge?", hits) == ["Malmo"]


def test_name_queries_a_phrase_or_cjk_bigrams() -> None:
    assert name_query("Oresund Bridge") == ("Oresund Bridge", "Oresund Bridge", True)
    assert name_query("年糕") == ("年糕", "'年糕'", False)
    assert name_query("小白兔") == ("小白兔", "'小白' & '白兔'", False)


def test_only_the_common_stems_a_name_may_have_are_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    common = frozenset({"'thank'", "'happi'", "'day'", "'i'", "'go'", "'malm'", "'river'"})
    monkeypatch.setattr(neighbours, "common_lexemes", lambda _conn, _table: common)
    sent = neighbours._common_for(None, "message", ["Thanks", "Happy Days", "Malmo"])
    assert sent == ["'day'", "'happi'", "'malm'", "'thank'"]
    assert neighbours._common_for(None, "message", ["Oresund"]) == []


# --- the statement ---------------------------------------------------------------------------


def _args(**params) -> dict:
    """send_named's parameters: nothing excluded, no filter, `params` over them."""
    return {
        "anima": A,
        "exclude_ids": [],
        "exclude_sessions": [],
        "types": None,
        "since": None,
        "until": None,
        "conversation": None,
        "speaker": None,
        "link_cap": 3,
        "common": [],
        "rows": 5,
        "not_ids": [],
        "or_q": None,
        "rank_w": 0.1,
        **params,
    }


def _named(conn, table: str, names: list[str], **params):
    return queries.send_named(conn, table, _args(**params), [name_query(n) for n in names])()


def test_named_rows_by_names_held_within_the_link_cap(db: Database) -> None:
    with db.transaction() as conn:
        both = _add(conn, "Noor took the ferry from Malmo to the Oresund Bridge.")
        one = _add(conn, "Malmo has a long beach.")
        lower = _add(conn, "The malmo-style buns were good.")  # the stem in lower case: not the name
        hit = _add(conn, "Noor grew up near Malmo.")
        resident = _add(conn, "Malmo is where Noor's sister lives.", pinned=True)
        for i in range(7):  # "Copenhagen" in more rows than the cap: it links nothing
            _add(conn, f"Copenhagen trip number {i}.")
        _add(conn, "Malmo again, for another anima.", anima="other")
        rows = _named(
            conn,
            "semantic_memory",
            ["Malmo", "Oresund Bridge", "Copenhagen", "Atlantis"],
            link_cap=6,
            not_ids=[hit],
            exclude_ids=[resident],
        )
        capped = _named(conn, "semantic_memory", ["Malmo"], link_cap=3)
        common = _named(conn, "semantic_memory", ["Malmo"], link_cap=6, common=["'malmo'"])
        msg = _say(conn, "We crossed the Oresund Bridge by train.")
        _say(conn, "The Oresund Bridge again, in a debug chat.", conv="aria:dbg", debug=True)
        messages = _named(conn, "message", ["Oresund Bridge"], link_cap=6)
    assert [r["id"] for r in rows] == [both, one]
    assert rows[0]["matched"] == ["Malmo", "Oresund Bridge"] and rows[1]["matched"] == ["Malmo"]
    assert rows[0]["score"] > rows[1]["score"] and lower not in [r["id"] for r in rows]
    assert capped == []  # the index finds Malmo in 5 rows of this anima: more than a cap of 3
    assert common == []  # a stem the statistics show as common is not read at all
    assert [r["id"] for r in messages] == [msg] and messages[0]["title"] == "chat"


def test_named_statement_reads_the_index_not_the_table(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO semantic_memory (anima_id, type, content, source_sessions)
               SELECT %s, 'world', 'Note ' || g || ' ' || md5(g::text), ARRAY['aria:s1']
               FROM generate_series(1, 20000) g""",
            (A,),
        )
        _add(conn, "Pip the axolotl lives in Malmo.")
        conn.execute("ANALYZE semantic_memory")
    with db.transaction() as conn:
        args = _args(link_cap=20)
        recorded = []

        class Recording:
            def __init__(self, real) -> None:
                self.real = real

            def execute(self, sql, params=None):
                recorded.append((sql, params))
                return self.real.execute(sql, params)

        rows = queries.send_named(Recording(conn), "semantic_memory", args, [name_query("Malmo")])()
        sql, params = recorded[0]
        plan = "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + sql, params).fetchall())
    assert len(rows) == 1 and rows[0]["matched"] == ["Malmo"]
    assert "semantic_memory_fts_idx" in plan and "Seq Scan on semantic_memory" not in plan, plan


# --- joined to the context ---------------------------------------------------------------------


def _store(conn) -> dict[str, int]:
    ids = {
        "hit": _add(conn, "Noor grew up near Malmo, by the sea."),
        # the answer shares no word with the question: only the name leads to it
        "answer": _add(conn, "Malmo lies on the southern coast, by a long bridge."),
        "msg_answer": _say(conn, "I spent every winter holiday in Malmo with my grandmother."),
    }
    for i in range(12):
        _add(conn, f"Noor grew up playing chess number {i} with friends.")
        _say(conn, f"We grew up watching cartoons, episode {i}.")
    return ids


def test_neighbours_bring_in_what_the_hits_name(db: Database) -> None:
    with db.transaction() as conn:
        ids = _store(conn)
    with db.transaction() as conn:
        off = assemble_context(conn, A, "Where did Noor grow up?", settings=LEXICAL, now=NOW)
        on = assemble_context(conn, A, "Where did Noor grow up?", settings=WITH, now=NOW)
        found = first_stage(conn, A, "Where did Noor grow up?", settings=WITH, session_id=None, now=NOW)
    off_memories = [i.id for i in off.section("memories").items]
    on_memories = [i.id for i in on.section("memories").items]
    assert ids["hit"] in off_memories and ids["answer"] not in off_memories
    assert ids["answer"] in on_memories
    placed = next(i for i in on.section("memories").items if i.id == ids["answer"])
    assert placed.why == "names Malmo"
    assert found.neighbours.names == ["Malmo"]
    assert [i.id for i in found.neighbours.messages] == [ids["msg_answer"]]
    # the sections keep their budgets
    assert sum(s.chars_used for s in on.sections if s.name != "resident") <= 2000


def test_off_by_setting_nothing_more_is_asked(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    with db.transaction() as conn:
        _store(conn)
    asked: list[str] = []
    real = queries.send_named

    def spy(*args, **kw):
        asked.append(args[1])
        return real(*args, **kw)

    monkeypatch.setattr(queries, "send_named", spy)
    with db.transaction() as conn:
        assemble_context(conn, A, "Where did Noor grow up?", settings=LEXICAL, now=NOW)
        assert asked == []
        assemble_context(conn, A, "Where did Noor grow up?", settings=WITH, now=NOW)
        assert asked == ["semantic_memory", "message"]  # one statement per list, one round trip
        # hits that name nothing new ask nothing
        asked.clear()
        assemble_context(conn, A, "chess", settings=WITH, now=NOW)
        assert asked == []


def test_limits_are_read_at_call_time(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    with db.transaction() as conn:
        ids = _store(conn)
    monkeypatch.setattr(neighbours, "ROWS", 0)
    with db.transaction() as conn:
        found = first_stage(conn, A, "Where did Noor grow up?", settings=WITH, session_id=None, now=NOW)
    assert found.neighbours.names == ["Malmo"] and found.neighbours.memories == []
    assert ids["answer"] not in [i.id for i in found.memories]

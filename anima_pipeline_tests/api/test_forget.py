"""Forget and correct (anima_pipeline/memory/forget.py) on a real store with real offline nights
(night/runner.py's run_days): corrections settle a memory and the nights leave it as it is; a
forget follows lineage, soft or purged; a purge leaves no text behind in the database and
a revert never brings it back; the same forget twice changes nothing.

The conversations are synthetic: `c-ex` is the one forgotten; its distinctive names appear
nowhere else. `c-home` (the next day) repeats one of its sentences, so the night merges the
two into a memory with two sources."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError, NotFound
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.night.revert import revert_run
from anima_pipeline.night.runner import run_days
from anima_pipeline.store import erasure as q
from anima_pipeline.store import shadows as shadow
from anima_pipeline.store.db import Database

ANIMA = "nadia"
D1, D2 = date(2026, 11, 17), date(2026, 11, 18)
NAMES = ("Bartholomew", "Quillfeather", "Zanzibar", "Marrakesh")  # only in c-ex
SHARED = "My sister Oriane lives in Lisbon and she has a cat named Pistachio."
EX = [
    ("user", "I broke up with my ex Bartholomew Quillfeather last spring after the trip to Zanzibar."),
    ("assistant", "That sounds hard. How are you feeling about it now?"),
    ("user", SHARED),
    ("assistant", "A cat named Pistachio, how lovely."),
    ("user", "Bartholomew still sends me postcards from Marrakesh every single month."),
    ("assistant", "Do you answer them?"),
]
HOME = [
    ("user", "I moved to Lisbon in March 2026 for a job at the harbour office."),
    ("assistant", "Congratulations on the move!"),
    ("user", SHARED),
    ("assistant", "Nice, say hello to Oriane."),
]


def messages(conv: str, day: date, lines: list[tuple[str, str]]) -> list[dict]:
    return [
        {
            "conversation_id": conv,
            "message_id": f"{conv}-{i}",
            "role": role,
            "speaker": "Nadia" if role == "user" else "Anima",
            "content": text,
            "created_at": f"{day.isoformat()}T{10 + i // 60:02d}:{i % 60:02d}:00+08:00",
        }
        for i, (role, text) in enumerate(lines)
    ]


def runs_of(text: str, n: int = 8) -> set[str]:
    words = re.findall(r"\w+", text.lower())
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


# every 8-word run said in c-ex and nowhere else: none of it may survive a purge
FORGOTTEN_RUNS = set().union(*(runs_of(t) for _, t in EX)) - set().union(*(runs_of(t) for _, t in HOME))


def leftovers(texts: list[str]) -> list[str]:
    """The forgotten names and 8-word runs found in `texts`."""
    found = []
    for text in texts:
        low = text.lower()
        found += [n for n in NAMES if n.lower() in low]
        found += sorted(runs_of(text) & FORGOTTEN_RUNS)
    return found


def database_texts(db: Database) -> list[str]:
    """Every row of every table of the memory database, as text."""
    with db.transaction() as conn:
        tables = [
            r["table_name"]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        return [
            r["t"]
            for table in tables
            for r in conn.execute(f'SELECT t::text AS t FROM "{table}" t').fetchall()
        ]


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=db_url, home=tmp_path / "home")


@pytest.fixture
def slept(db: Database, settings: Settings) -> AnimaMemory:
    """Two nights: c-ex on D1, c-home on D2 (merging the shared sentence into one memory)."""
    memory = AnimaMemory(db, ANIMA, settings=settings)
    memory.append(messages("c-ex", D1, EX))
    memory.append(messages("c-home", D2, HOME))
    run_days(db, settings, [D1], mode="full", run_id="run-d1")
    run_days(db, settings, [D2], mode="full", run_id="run-d2")
    return memory


def active(db: Database) -> dict[int, dict]:
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT id, content, source_sessions FROM semantic_memory WHERE anima_id = %s AND status = 'active'",
            (ANIMA,),
        ).fetchall()
    return {r["id"]: r for r in rows}


def test_the_nights_merge_the_shared_sentence_into_two_sources(slept: AnimaMemory, db: Database) -> None:
    two = [m for m in active(db).values() if set(m["source_sessions"]) == {"c-ex", "c-home"}]
    assert two and "Oriane" in two[0]["content"]
    assert leftovers([m["content"] for m in active(db).values()])  # c-ex's names are known before


def test_purge_of_a_conversation_leaves_no_text_and_keeps_the_other_source(
    slept: AnimaMemory, db: Database
) -> None:
    with db.transaction() as conn:  # the session's rolling summary (recall/session_view.py) holds its text
        conn.execute(
            """INSERT INTO session_summary (anima_id, conversation_id, watermark, watermark_at, content, messages, engine)
               VALUES (%s, 'c-ex', 99, now(), %s, 6, 'offline')""",
            (ANIMA, "Nadia spoke of Bartholomew Quillfeather and the trip to Zanzibar."),
        )
    live = slept.db.url
    shadow.create(live, "before", D2)  # a replay's copy of the store: purged with it
    try:
        report = slept.forget("conversation", "c-ex", purge=True, requested_by="test")
        assert report.shadows == ["before"]
        with Database(shadow.shadow_url(live, "before")) as copy:
            assert leftovers(database_texts(copy)) == []
    finally:
        shadow.drop(live, "before")
    assert report.changed and report.tables["conversation"].erased == 1
    assert report.tables["message"].erased == len(EX) and report.memories_erased
    # a memory with two sources keeps the other one, its text from what c-home said
    kept = [m for m in active(db).values() if "Oriane" in m["content"]]
    assert kept and all(m["source_sessions"] == ["c-home"] for m in kept)
    assert report.memories_rewritten
    # recomputation planned for both days' summaries and the self blocks of the last night
    planned = {r.day: r.steps for r in report.recompute}
    assert "temporal_summaries/day" in planned[D1] and "self_blocks/refreshed" in planned[D2]
    run_days(
        db,
        slept.settings,
        [D1, D2],
        force=True,
        steps=[
            "temporal_summaries/day",
            "temporal_summaries/cascade",
            "dreams/journal",
            "self_blocks/autobiography_summary",
            "self_blocks/refreshed",
        ],
    )
    texts = database_texts(db)
    assert leftovers(texts) == []
    # the recomputed summary of D2 stands, without the forgotten content; D1 had only c-ex
    with db.transaction() as conn:
        days = {
            r["period_start"]: r["content"]
            for r in conn.execute("SELECT period_start, content FROM temporal_summary WHERE level = 'day'")
        }
        tomb = conn.execute("SELECT * FROM memory_event WHERE table_name = 'forget'").fetchall()
    assert D1 not in days and "harbour office" in days[D2]
    assert len(tomb) == 1 and tomb[0]["op"] == "purge" and tomb[0]["after"]["requested_by"] == "test"
    assert leftovers([str(tomb[0])]) == []
    # nothing in recall or search
    for query in ("Bartholomew Quillfeather", "Zanzibar trip", "postcards from Marrakesh"):
        assert leftovers([slept.context(query).rendered]) == []
        assert slept.search(query).items == [] or leftovers([i.text for i in slept.search(query).items]) == []
        assert (
            slept.search_messages(query).items == []
            or leftovers([i.text for i in slept.search_messages(query).items]) == []
        )
    with pytest.raises(NotFound, match="erased"):
        slept.memory(report.memories_erased[0])
    # a revert of an older run never brings erased content back
    with db.transaction() as conn:
        stats = revert_run(conn, "run-d1", "revert-d1", force=True)
    assert stats["skipped_erased"] > 0
    assert leftovers(database_texts(db)) == []
    # the same forget twice changes nothing
    before = database_texts(db)
    again = slept.forget("conversation", "c-ex", purge=True)
    assert not again.changed and "erased before" in again.note
    assert sorted(database_texts(db)) == sorted(before)


def test_soft_forget_hides_and_deprecates_and_a_revert_brings_it_back(
    slept: AnimaMemory, db: Database
) -> None:
    report = slept.forget("conversation", "c-ex")
    assert report.changed and report.tables["message"].hidden == len(EX)
    assert report.memories_deprecated and not report.memories_erased
    assert leftovers([m["content"] for m in active(db).values()]) == []  # nothing of c-ex active
    assert slept.search_messages("Bartholomew postcards").items == []
    assert leftovers([slept.context("Bartholomew Quillfeather").rendered]) == []
    again = slept.forget("conversation", "c-ex")
    assert not again.changed
    with db.transaction() as conn:
        revert_run(conn, report.run_id, "revert-forget")
    assert list(slept.search_messages("Bartholomew postcards").items)  # the messages are back
    assert leftovers([m["content"] for m in active(db).values()])


def test_forget_one_message_retires_only_what_it_alone_says(slept: AnimaMemory, db: Database) -> None:
    with db.transaction() as conn:
        mid = conn.execute(
            "SELECT id FROM message WHERE conversation_id = 'c-ex' AND content LIKE 'Bartholomew still%'"
        ).fetchone()["id"]
    with db.transaction() as conn:  # how `anima forget` finds the anima of an id
        assert q.owners(conn, "message", f"m-{mid}") == q.owners(conn, "message", str(mid)) == [ANIMA]
        assert q.owners(conn, "memory", "f-1") == [ANIMA] and q.owners(conn, "conversation", "c-nope") == []
    report = slept.forget("message", f"m-{mid}", purge=True)
    assert report.tables["message"].erased == 1
    contents = [m["content"] for m in active(db).values()]
    assert not any("Marrakesh" in c for c in contents)
    assert any("Quillfeather" in c for c in contents)  # said by another message: kept
    assert not slept.forget("message", f"m-{mid}", purge=True).changed
    with db.transaction() as conn:  # an erased message is still found (its tombstone), to say so
        assert q.owners(conn, "message", f"m-{mid}") == [ANIMA]


def test_purge_of_a_memory_and_of_the_whole_anima(slept: AnimaMemory, db: Database) -> None:
    ref = next(f"f-{i}" for i, m in active(db).items() if "Quillfeather" in m["content"])
    report = slept.delete(ref)
    assert report.memories_erased and ref in report.memories_erased
    with pytest.raises(NotFound, match=f"{ref} was erased"):
        slept.deprecate(ref, "gone")
    before = database_texts(db)
    for again in (slept.delete(ref), slept.forget("memory", ref), slept.forget("memory", ref, purge=True)):
        assert not again.changed and not again.memories_erased and not again.memories_deprecated
        assert again.note.startswith(f"memory {ref} was erased before (")
    assert sorted(database_texts(db)) == sorted(before)  # a repeat writes nothing
    with pytest.raises(NotFound, match="f-999999 does not exist"):
        slept.delete("f-999999")
    whole = slept.forget("anima", ANIMA, purge=True)
    assert whole.tables["message"].erased == len(EX) + len(HOME)
    [tombstone] = [t for t in database_texts(db) if ANIMA in t]  # only the purge's own record
    assert ",forget,anima:nadia,purge," in tombstone and leftovers([tombstone]) == []
    assert not slept.forget("anima", ANIMA, purge=True).changed


def test_corrections_are_audited_settled_and_left_as_they_are_by_the_night(
    db: Database, settings: Settings
) -> None:
    memory = AnimaMemory(db, ANIMA, settings=settings)
    lines = [
        ("user", "I moved to Lisbon in March 2026 for a job at the harbour office."),
        ("assistant", "Congratulations!"),
    ]
    memory.append(messages("c-move", D1, lines))
    run_days(db, settings, [D1], mode="full", run_id="run-1")
    [lisbon] = [i for i, m in active(db).items() if "Lisbon" in m["content"]]
    ref = f"f-{lisbon}"
    fixed = memory.update(ref, content="Nadia moved to Porto in March 2026 for a job at the harbour office.")
    assert fixed.settled_at is not None and "Porto" in fixed.content
    pinned = memory.pin(ref)
    assert pinned.pinned
    # the same conversation re-read (a forced night) neither re-creates nor rewrites the old fact
    run_days(db, settings, [D1], mode="full", force=True, run_id="run-2")
    contents = [m["content"] for m in active(db).values()]
    assert not any("Lisbon" in c for c in contents), contents
    assert memory.memory(ref).content == fixed.content and memory.memory(ref).pinned
    # a deprecated fact is not learned again from the same messages either
    memory.unpin(ref, "no longer needed every turn")
    memory.deprecate(ref, "the user asked to drop it")
    run_days(db, settings, [D1], mode="full", force=True, run_id="run-3")
    assert not any("Porto" in m["content"] or "Lisbon" in m["content"] for m in active(db).values())
    with db.transaction() as conn:
        ops = [
            r["op"]
            for r in conn.execute(
                "SELECT op FROM memory_event WHERE memory_id = %s AND step = 'agent/correct' ORDER BY id",
                (str(lisbon),),
            )
        ]
    assert ops == ["update", "settle", "pin", "settle", "unpin", "settle", "deprecate", "settle"]
    with pytest.raises(InputError, match="content"):
        memory.update(ref, content="")
    with pytest.raises(NotFound):
        AnimaMemory(db, "someone-else", settings=settings).deprecate(ref, "not mine")


def test_deep_sleep_leaves_a_correction_unmerged(db: Database, settings: Settings) -> None:
    memory = AnimaMemory(db, ANIMA, settings=settings)
    a = memory.remember("Nadia's sister Oriane has a cat named Pistachio.", session_id="c-1")
    b = memory.remember("Nadia's sister Oriane has a cat named Pistachio", session_id="c-2")
    memory.update(a.id, content="Nadia's sister Oriane has a grey cat named Pistachio.")
    memory.append(messages("c-1", D1, [("user", "hello"), ("assistant", "hi")]))
    run_days(db, settings, [D1], mode="full", run_id="run-deep")
    kept = memory.memory(a.id)
    assert kept.status == "active" and kept.content == "Nadia's sister Oriane has a grey cat named Pistachio."
    assert memory.memory(b.id).superseded_by in (None, a.id)


def test_soft_forget_of_the_whole_anima_retires_everything_once(slept: AnimaMemory, db: Database) -> None:
    report = slept.forget("anima", ANIMA)
    assert report.changed and report.tables["message"].hidden == len(EX) + len(HOME)
    assert active(db) == {} and slept.search_messages("Lisbon").items == []
    assert slept.status()["messages"] == 0  # status counts what recall can still see
    with db.transaction() as conn:  # soft: nothing deleted
        kept = conn.execute("SELECT count(*) AS n FROM message WHERE anima_id = %s", (ANIMA,)).fetchone()
    assert kept["n"] == len(EX) + len(HOME)
    assert not slept.forget("anima", ANIMA).changed
    with pytest.raises(InputError, match="anima_id"):
        slept.forget("anima", "someone-else")


def test_a_revert_waits_for_a_purge_of_its_anima_and_writes_back_nothing_it_scrubbed(
    slept: AnimaMemory, db: Database
) -> None:
    import threading

    from anima_pipeline.store.db import anima_lock

    outcome: dict = {}

    def revert() -> None:
        try:
            with db.transaction() as conn:
                outcome["stats"] = revert_run(conn, "run-d1", "revert-during-purge", force=True)
        except Exception as exc:  # re-raised in the test's thread below, with its traceback
            outcome["error"] = exc

    with db.transaction() as conn:  # a purge in flight: it holds the anima's lock, as forget does
        anima_lock(conn, ANIMA)
        ids = [
            r["memory_id"]
            for r in conn.execute(
                "SELECT DISTINCT memory_id FROM memory_event WHERE run_id = 'run-d1' AND anima_id = %s"
                " AND table_name = 'semantic_memory'",
                (ANIMA,),
            ).fetchall()
        ]
        worker = threading.Thread(target=revert)
        worker.start()
        worker.join(1.0)
        assert worker.is_alive(), outcome  # the revert waits for the purge's transaction
        scrubbed = q.scrub_events(conn, ANIMA, "semantic_memory", ids)
    worker.join(30)
    assert not worker.is_alive(), "the revert did not end after the purge"
    if "error" in outcome:
        raise outcome["error"]
    with db.transaction() as conn:
        of_run = conn.execute(
            "SELECT count(*) AS n FROM memory_event WHERE run_id = 'run-d1' AND erased_at IS NOT NULL"
        ).fetchone()["n"]
    # read after the purge: every event of the run it scrubbed is skipped, none written back
    assert scrubbed >= of_run > 0 and outcome["stats"]["skipped_erased"] == of_run

"""Temporal summaries on a real database: one day summary per day with talk, replaced on a
re-run, none for a quiet day; the cascade closes a week on Sunday, a month on its last day
and a year on 31 December, from the level below, and does nothing on other days."""

from __future__ import annotations

from datetime import date, timedelta

from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night
from anima_pipeline.night.steps.temporal.step import (
    animas_for,
    cascade,
    cascade_inputs,
    closed_periods,
    summarize_day,
)
from anima_pipeline.store.archive import ArchiveRecord, ImportStats, import_records
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import TemporalRepo
from anima_pipeline.store.memories import MemoryRepo

MONDAY = date(2026, 11, 16)
SUNDAY = date(2026, 11, 22)


def _night(day: date, **kw) -> Night:
    return Night(day=day, engine=OfflineEngine(), **kw)


def _import(
    conn: Connection, anima: str, day: date, conv: str, lines: list[tuple[str, str]], title: str
) -> None:
    records = [
        ArchiveRecord(
            anima_id=anima,
            conversation_id=conv,
            message_id=f"{conv}:{i}",
            role=role,
            speaker="Lin Wei" if role == "user" else "Aria",
            content=text,
            created_at=f"{day.isoformat()}T20:{10 + i:02d}:00+08:00",
            title=title,
        )
        for i, (role, text) in enumerate(lines)
    ]
    import_records(
        conn, records, Audit(conn=conn, anima_id=anima, run_id="import", step="import"), ImportStats()
    )


def _audit(conn: Connection, anima: str, day: date, step: str = "semantic_memory/extracted") -> Audit:
    return Audit(conn=conn, anima_id=anima, run_id="setup", step=step, day=day)


TALK = [
    ("user", "Hi Aria!"),
    ("assistant", "Hi Lin Wei, how was your day?"),
    ("user", "I work at a bank in Lujiazui and I run along the Huangpu on Sundays."),
    ("user", "My first half marathon is on 2026-11-22, my longest run so far was 18 km."),
    ("assistant", "That is a big goal! Good night."),
]


def _summaries(conn: Connection, level: str) -> list[dict]:
    return conn.execute(
        "SELECT * FROM temporal_summary WHERE level = %s ORDER BY period_start", (level,)
    ).fetchall()


def test_day_summary_written_once_replaced_on_rerun_and_none_for_a_quiet_day(db):
    with db.transaction() as conn:
        _import(conn, "a", MONDAY, "c1", TALK, "Running plans")
        repo = MemoryRepo(conn, _audit(conn, "a", MONDAY))
        old = repo.create("a", {"type": "world", "content": "Lin Wei works at a bank."})
        repo.create("a", {"type": "experience", "content": "Lin Wei plans a half marathon on 2026-11-22."})
        repo.update(old.id, {"content": "Lin Wei works at a bank in Lujiazui."})
        MemoryRepo(conn, _audit(conn, "a", MONDAY, "dreams/journal")).create(
            "a", {"type": "world", "content": "Written by another step, not a memory change of sleep."}
        )
    first = summarize_day(db, _night(MONDAY), "a")
    assert first.stats["levels"] == 1 and first.stats["summary_chars"] > 0 and first.stats["input_chars"] > 0
    with db.transaction() as conn:
        [row] = _summaries(conn, "day")
        assert (row["period_start"], row["period_end"]) == (MONDAY, MONDAY)
        text = row["content"]
        # content first (who, what about, what was learnt, named things), no counts or clock times
        assert text.startswith("Day 2026-11-16: Lin Wei") and "Conversations: Running plans" in text
        assert "20:10" not in text and "message(s)" not in text and "Named: " in text and "Lujiazui" in text
        assert "18 km" in text and "Hi Aria" not in text  # informative sentences, no greetings
        assert "Learned:" in text and "half marathon on 2026-11-22" in text
        assert "Changed:" not in text or "another step" not in text
        assert "another step" not in text
        MemoryRepo(conn, _audit(conn, "a", MONDAY, "semantic_memory/merged")).deprecate(old.id, "outdated")
    again = summarize_day(db, _night(MONDAY, force=True), "a")
    assert again.stats["levels"] == 1
    with db.transaction() as conn:
        [row] = _summaries(conn, "day")  # replaced, not added
        assert (
            "Changed:" in row["content"]
            and "deprecated f-" in row["content"]
            and "outdated" in row["content"]
        )
    quiet = summarize_day(db, _night(MONDAY + timedelta(days=1)), "a")
    assert quiet.stats["levels"] == 0
    with db.transaction() as conn:
        assert len(_summaries(conn, "day")) == 1


def _day_summary(
    conn: Connection, anima: str, day: date, text: str, level: str = "day", end: date | None = None
) -> None:
    TemporalRepo(conn, _audit(conn, anima, day, "temporal_summaries/day")).upsert(
        anima, level, day, end or day, text, {}
    )


def test_closed_periods():
    assert closed_periods(date(2026, 11, 18)) == []
    assert [p[0] for p in closed_periods(SUNDAY)] == ["week"]
    assert closed_periods(date(2026, 11, 30)) == [("month", date(2026, 11, 1), date(2026, 11, 30))]
    assert [p[0] for p in closed_periods(date(2023, 12, 31))] == ["week", "month", "year"]


def test_week_on_sunday_nothing_on_other_days(db):
    with db.transaction() as conn:
        for i, fact in enumerate(
            ["Lin Wei met Mei in Chengdu on 2026-11-16.", "Mochi broke 3 cables on Tuesday."]
        ):
            _day_summary(conn, "a", MONDAY + timedelta(days=i), f"Day.\nHighlights:\n- {fact}\n- ok")
        assert animas_for(conn, _night(SUNDAY - timedelta(days=1))) == []
        assert animas_for(conn, _night(SUNDAY)) == ["a"]  # a quiet Sunday still closes the week
    saturday = cascade(db, _night(SUNDAY - timedelta(days=1)), "a")
    assert saturday.stats["levels"] == 0
    sunday = cascade(db, _night(SUNDAY), "a")
    assert sunday.stats["levels"] == 1 and sunday.stats["level_names"] == "week"
    with db.transaction() as conn:
        [week] = _summaries(conn, "week")
        assert (week["period_start"], week["period_end"]) == (MONDAY, SUNDAY)
        assert (
            "2026-11-16: Lin Wei met Mei in Chengdu" in week["content"]
            and "Mochi broke 3 cables" in week["content"]
        )
        assert "Week 2026-W47" in week["content"]
    cascade(db, _night(SUNDAY, force=True), "a")
    with db.transaction() as conn:
        assert len(_summaries(conn, "week")) == 1
    assert cascade(db, _night(SUNDAY, force=True), "nobody").stats["levels"] == 0  # nothing below: nothing


def test_month_on_its_last_day_from_weeks_and_boundary_days(db):
    last = date(2026, 11, 30)
    with db.transaction() as conn:
        _day_summary(conn, "a", date(2026, 10, 31), "Lin Wei went to Leshan in October.")
        _day_summary(conn, "a", date(2026, 11, 1), "Lin Wei flew back to Shanghai on 2026-11-01.")
        _day_summary(conn, "a", date(2026, 10, 26), "Week crossing into November.", "week", date(2026, 11, 1))
        _day_summary(conn, "a", date(2026, 11, 3), "Covered by its week summary.")
        _day_summary(
            conn, "a", date(2026, 11, 2), "Lin Wei started at Qiyuan Robotics.", "week", date(2026, 11, 8)
        )
        _day_summary(conn, "a", last, "Lin Wei ran 21 km with Mei on 2026-11-30.")
        inputs = cascade_inputs(conn, "a", "month", date(2026, 11, 1), last)
        assert [(r["level"], r["period_start"]) for r in inputs] == [
            ("day", date(2026, 11, 1)),
            ("week", date(2026, 11, 2)),
            ("day", last),
        ]
    result = cascade(db, _night(last), "a")
    assert result.stats["level_names"] == "month"
    with db.transaction() as conn:
        [month] = _summaries(conn, "month")
        assert (month["period_start"], month["period_end"]) == (date(2026, 11, 1), last)
        text = month["content"]
        assert "Qiyuan Robotics" in text and "21 km" in text and "flew back" in text
        assert "October" not in text and "Covered by" not in text


def test_year_on_31_december_from_months(db):
    eve = date(2026, 12, 31)  # a Thursday: closes the month and the year, not a week
    with db.transaction() as conn:
        _day_summary(
            conn,
            "a",
            date(2026, 11, 1),
            "In November Lin Wei ran the Shanghai half marathon.",
            "month",
            date(2026, 11, 30),
        )
        _day_summary(conn, "a", eve, "Lin Wei celebrated the new year in Leshan with Mei on 2026-12-31.")
    others = cascade(db, _night(date(2026, 12, 30)), "a")
    assert others.stats["levels"] == 0
    result = cascade(db, _night(eve), "a")
    assert result.stats["level_names"] == "month,year"
    with db.transaction() as conn:
        [year] = _summaries(conn, "year")
        assert (year["period_start"], year["period_end"]) == (date(2026, 1, 1), eve)
        assert "Year 2026" in year["content"]
        assert "2026-11: " in year["content"] and "2026-12: " in year["content"]  # from the two months
        assert len(_summaries(conn, "month")) == 2


class _WrongDayEngine(OfflineEngine):
    """A model that writes the summary under the wrong date, then the right one."""

    name = "scripted"

    def __init__(self) -> None:
        self.results = []

    def run(self, request, runner, offline_plan):
        from anima_pipeline.llm.contract import Usage

        assert (
            request.tools[0].name == "write_temporal_summary" and "Period: level day" in request.user[2].text
        )
        for start in ("2026-11-10", MONDAY.isoformat()):
            self.results.append(
                runner.call(
                    "write_temporal_summary",
                    {
                        "level": "day",
                        "period_start": start,
                        "period_end": start,
                        "content": f"model wrote {start}",
                    },
                )
            )
        return Usage(calls=1)


def test_a_model_cannot_write_another_period(db):
    with db.transaction() as conn:
        _import(conn, "a", MONDAY, "c1", TALK, "Running plans")
    engine = _WrongDayEngine()
    result = summarize_day(db, Night(day=MONDAY, engine=engine), "a")
    assert engine.results[0].is_error and "period_start 2026-11-16" in engine.results[0].content
    assert not engine.results[1].is_error and result.stats["levels"] == 1
    with db.transaction() as conn:
        assert [(r["period_start"], r["content"]) for r in _summaries(conn, "day")] == [
            (MONDAY, "model wrote 2026-11-16")
        ]

"""Review mode on a real PostgreSQL: a night's merges and deprecations wait as proposals, only an
approval applies exactly that operation (audited, revertible), a rejection changes nothing and
is remembered, and a proposal whose memories changed since is refused."""

from __future__ import annotations

import json
import subprocess
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night
from anima_pipeline.night.revert import revert_run
from anima_pipeline.night.steps.deep.step import merge, split
from anima_pipeline.review import decisions as reviewing
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline_tests.conftest import cli_env, invoke_cli, run_cli

CST = ZoneInfo("Asia/Shanghai")
A = "quill"
DAY = date(2024, 3, 5)
TWINS = ("Odile keeps three beehives behind the old mill.", "Odile keeps three beehives behind the old mill.")


def plant(db: Database, *contents: str, day: date = date(2024, 2, 1)) -> list[int]:
    with db.transaction() as conn:
        repo = MemoryRepo(
            conn, Audit(conn=conn, anima_id=A, run_id="plant", step="semantic_memory/extracted", day=day)
        )
        return [
            repo.create(A, {"type": "world", "content": c, "source_sessions": [f"s-{i}"]}).id
            for i, c in enumerate(contents)
        ]


def night(tmp_path: Path, review: bool = True) -> Night:
    return Night(day=DAY, engine=OfflineEngine(), tz=CST, log_dir=tmp_path, mode="full", review=review)


def memories(db: Database) -> dict[int, SemanticMemory]:
    with db.transaction() as conn:
        rows = conn.execute("SELECT id FROM semantic_memory WHERE anima_id = %s ORDER BY id", (A,)).fetchall()
        return {m.id: m for m in MemoryRepo(conn).get_many([r["id"] for r in rows])}


def snapshot(db: Database) -> list[tuple]:
    return [(m.id, m.status, m.content, m.superseded_by) for m in memories(db).values()]


def test_a_proposed_merge_does_nothing_until_approved_then_exactly_that_merge(
    db: Database, tmp_path: Path
) -> None:
    a, b, other = plant(db, *TWINS, "Odile sells the honey at the Saturday market.")
    before = snapshot(db)

    result = merge(db, night(tmp_path), A)

    assert snapshot(db) == before  # nothing merged, nothing deprecated, nothing created
    assert result.stats["proposed"] == 1 and result.stats.get("merged", 0) == 0
    [view] = reviewing.pending(db, A)
    assert view.proposal.tool == "merge_semantic_memories"
    assert sorted(view.proposal.memory_ids) == [a, b]
    assert {m.id for m in view.memories} == {a, b}  # shown side by side

    # the same night again proposes nothing new: the open proposal is found
    again = merge(
        db,
        Night(
            day=DAY, engine=OfflineEngine(), tz=CST, log_dir=tmp_path, mode="full", review=True, force=True
        ),
        A,
    )
    assert again.stats.get("proposed", 0) == 0 and again.stats["proposed_before"] == 1
    assert len(reviewing.pending(db, A)) == 1

    [decision] = reviewing.approve(db, Settings(), A, [view.proposal.ref], who="tester")
    assert decision.status == "approved" and decision.run_id
    after = memories(db)
    new = [m for m in after.values() if m.id not in (a, b, other)]
    assert len(new) == 1 and new[0].content == TWINS[0] and new[0].source_sessions == ["s-0", "s-1"]
    assert after[a].status == after[b].status == "deprecated"
    assert after[a].superseded_by == after[b].superseded_by == new[0].id
    assert after[other].status == "active"
    assert reviewing.pending(db, A) == []

    # an approval is a run like any other: reverting it gives the store back
    with db.transaction() as conn:
        revert_run(conn, decision.run_id, "revert-approval")
    assert {(i, s) for i, s, _, _ in snapshot(db) if i in (a, b, other)} == {
        (a, "active"),
        (b, "active"),
        (other, "active"),
    }


def test_a_rejected_proposal_changes_nothing_and_is_not_proposed_again(db: Database, tmp_path: Path) -> None:
    plant(db, *TWINS)
    merge(db, night(tmp_path), A)
    [view] = reviewing.pending(db, A)
    before = snapshot(db)

    [decision] = reviewing.reject(db, A, [view.proposal.id], reason="they are two different hives")
    assert decision.status == "rejected" and snapshot(db) == before

    again = merge(
        db,
        Night(
            day=DAY, engine=OfflineEngine(), tz=CST, log_dir=tmp_path, mode="full", review=True, force=True
        ),
        A,
    )
    assert again.stats["review_rejected_before"] == 1 and reviewing.pending(db, A) == []
    with pytest.raises(reviewing.ReviewError, match="already decided: rejected"):
        reviewing.approve(db, Settings(), A, [view.proposal.ref])


def test_a_proposal_whose_memories_changed_since_is_refused(db: Database, tmp_path: Path) -> None:
    a, _ = plant(db, *TWINS)
    merge(db, night(tmp_path), A)
    [view] = reviewing.pending(db, A)
    with db.transaction() as conn:  # the agent corrects one of them in the meantime
        MemoryRepo(conn, Audit(conn=conn, anima_id=A, run_id="agent-x", step="agent/update")).update(
            a, {"content": "Odile keeps four beehives behind the old mill."}
        )
    before = snapshot(db)

    [decision] = reviewing.approve(db, Settings(), A, [view.proposal.ref])

    assert decision.status == "conflict" and f"f-{a} changed after it was proposed" in decision.message
    assert snapshot(db) == before
    assert reviewing.pending(db, A, status="conflict")[0].proposal.id == view.proposal.id


def test_approvals_stay_under_the_loss_guard(db: Database, tmp_path: Path) -> None:
    pairs = [
        (f"Hive {n} stands by the {w} gate.",) * 2
        for n, w in enumerate(["north", "south", "east", "west", "river"])
    ]
    plant(db, *[c for p in pairs for c in p])  # ten memories, five twin pairs
    merge(db, night(tmp_path), A)
    assert len(reviewing.pending(db, A)) == 5
    before = snapshot(db)

    with pytest.raises(Exception, match="guard"):  # five merges retire five of ten: over the step share
        reviewing.approve(db, Settings(guards={"step_share": 0.25, "min": 3}), A, day=DAY)
    assert snapshot(db) == before and len(reviewing.pending(db, A)) == 5

    decisions = reviewing.approve(
        db,
        Settings(guards={"step_share": 0.25, "min": 3}),
        A,
        [p.proposal.ref for p in reviewing.pending(db, A)][:2],
    )
    assert [d.status for d in decisions] == ["approved", "approved"]


def test_a_proposed_split_says_why(db: Database, tmp_path: Path) -> None:
    [whole] = plant(
        db, "Odile keeps three beehives behind the old mill. Odile sells honey at the Saturday market."
    )
    result = split(db, night(tmp_path), A)
    assert result.stats["proposed"] == 1
    [view] = reviewing.pending(db, A)
    assert view.proposal.tool == "split_semantic_memory" and view.proposal.memory_ids == [whole]
    assert view.proposal.reason == "2 independent facts in one memory"


def test_without_review_mode_the_night_applies_its_merge(db: Database, tmp_path: Path) -> None:
    a, b = plant(db, *TWINS)
    result = merge(db, night(tmp_path, review=False), A)
    assert result.stats["merged"] == 2 and reviewing.pending(db, A) == []
    assert memories(db)[a].status == "deprecated"


def test_anima_review_cli_lists_approves_and_rejects(db: Database, db_url: str, tmp_path: Path) -> None:
    env = cli_env(tmp_path, db_url)

    def anima(*args: str) -> subprocess.CompletedProcess:
        return run_cli(list(args), env)

    plant(db, *TWINS)
    plant(db, "Odile's dog is called Biscuit.", "Odile's dog is called Biscuit.")
    merge(db, night(tmp_path), A)

    listed = anima("review", "list", "--anima", A, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["tool"] for r in rows] == ["merge_semantic_memories"] * 2
    assert all(len(r["memories"]) == 2 for r in rows)
    assert [r["reason"] for r in rows] == ["exact twins"] * 2  # the offline planner says why

    text = anima("review", "list", "--anima", A)
    assert "beehives" in text.stdout and rows[0]["proposal"] in text.stdout
    assert "exact twins" in text.stdout  # the reason column, filled offline too

    ok = anima("review", "approve", rows[0]["proposal"], "--anima", A)
    assert ok.returncode == 0 and "approved" in ok.stdout, ok.stderr
    no = anima("review", "reject", rows[1]["proposal"], "--anima", A, "--reason", "keep both")
    assert no.returncode == 0 and "rejected" in no.stdout
    twice = anima("review", "approve", rows[1]["proposal"], "--anima", A)
    assert twice.returncode == 2 and "already decided" in twice.stderr


def test_review_decisions_need_no_anima_on_a_store_of_one(db: Database, db_url: str, tmp_path: Path) -> None:
    env = cli_env(tmp_path, db_url)
    plant(db, *TWINS)
    plant(db, "Odile's dog is called Biscuit.", "Odile's dog is called Biscuit.")
    merge(db, night(tmp_path), A)
    first, second = (v.proposal.ref for v in reviewing.pending(db, A))

    ok = invoke_cli(["review", "approve", first], env)  # exactly as README writes it
    assert ok.returncode == 0 and f"{first}: approved" in ok.stdout, ok.stderr
    no = invoke_cli(["review", "reject", second, "--reason", "keep both"], env)
    assert no.returncode == 0 and f"{second}: rejected" in no.stdout, no.stderr

    with db.transaction() as conn:  # a second anima: now the command cannot guess
        MemoryRepo(
            conn, Audit(conn=conn, anima_id="wren", run_id="plant", step="semantic_memory/extracted")
        ).create("wren", {"type": "world", "content": "Wren rows on the lake.", "source_sessions": ["s-w"]})
    for verb in ("approve", "reject"):
        two = invoke_cli(["review", verb, first], env)
        assert two.returncode == 2, two.stderr
        lines = two.stderr.strip().splitlines()
        assert len(lines) == 1 and "--anima" in lines[0] and "quill, wren" in lines[0], two.stderr
        assert "Traceback" not in two.stderr


def test_review_over_http_lists_approves_and_refuses_another_animas_key(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    import httpx2 as httpx

    from anima_pipeline.service.http.app import create_app
    from anima_pipeline.store.api_keys import create_key
    from testkit.live_server import serving

    a, b = plant(db, *TWINS)
    merge(db, night(tmp_path), A)
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="t", step="keys/create")
        key, _ = create_key(conn, audit, A)
        other, _ = create_key(conn, audit, "someone-else")
    with serving(create_app(db, Settings(database_url=db_url, home=tmp_path))) as base:
        url = f"{base}/v1/animas/{A}/review"
        auth = {"Authorization": f"Bearer {key}"}
        listed = httpx.get(url, headers=auth)
        assert listed.status_code == 200, listed.text
        [row] = listed.json()
        ref = f"r-{row['proposal']['id']}"
        assert {m["id"] for m in row["memories"]} == {a, b}
        assert httpx.get(url, params={"day": DAY.isoformat()}, headers=auth).json() == [row]
        for bad in (
            "0",
            "20240305",
            "2024-03-05T00:00:00+08:00",
        ):  # a number is not a day (it was 1970-01-01)
            refused = httpx.get(url, params={"day": bad}, headers=auth)
            assert refused.status_code == 422 and refused.json()["error"]["field"] == "day", refused.text
            assert "must be a day as YYYY-MM-DD" in refused.json()["error"]["message"]
        assert (
            httpx.post(f"{url}/{ref}/approve", headers={"Authorization": f"Bearer {other}"}).status_code
            == 403
        )
        done = httpx.post(f"{url}/{ref}/approve", headers=auth, json={"by": "dana"})
        assert done.status_code == 200 and done.json()[0]["status"] == "approved", done.text
        again = httpx.post(f"{url}/{ref}/approve", headers=auth)
        assert again.status_code == 409 and again.json()["error"]["field"] == "proposal"
        assert httpx.post(f"{url}/r-999999/reject", headers=auth).status_code == 404
    assert memories(db)[a].status == "deprecated"


def test_review_mode_from_settings_reaches_every_step_of_a_night(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    from anima_pipeline.memory.facade import AnimaMemory
    from anima_pipeline.night.runner import run_days

    a, b = plant(db, *TWINS)
    settings = Settings(database_url=db_url, home=tmp_path, review_mode=True)
    AnimaMemory(db, A, settings=settings).append(  # the anima talked that day, so its night runs
        [
            {
                "conversation_id": "c-1",
                "message_id": f"m-{i}",
                "role": role,
                "content": text,
                "created_at": f"2024-03-05T1{i}:00:00+08:00",
            }
            for i, (role, text) in enumerate(
                [("user", "The bees swarmed today."), ("assistant", "Did you catch them?")]
            )
        ]
    )
    run_days(db, settings, [DAY], steps=["semantic_memory/merged"], mode="full", animas=[A], workers=1)
    assert {memories(db)[i].status for i in (a, b)} == {"active"}
    [view] = reviewing.pending(db, A)
    assert view.proposal.step == "semantic_memory/merged" and view.proposal.day == DAY

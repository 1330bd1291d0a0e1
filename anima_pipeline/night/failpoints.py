"""The one seam of the kill tests in the package: a night calls `reached` at three points
(`before_step`, a step about to open its transaction; `in_step`, a step that wrote
everything, before its commit; `night_end`, an anima's steps all committed, its night not
yet marked done), and `reached` calls the hook an installed entry point of the group
`anima_pipeline.failpoints` provides, if any.

No distribution installs one: the package ships no failpoint. The tests put testkit's
(testkit/faults.py, docs/ordering.md "Fault points") on the path of the process they kill, so
it is found there and in the worker processes it spawns. The entry points are looked up once
per process, at the first point; afterwards a point without a hook costs one call. A hook
fails a point by raising a NightError, which fails the step (or the anima's night) like any
other error.
"""

from __future__ import annotations

from datetime import date
from functools import cache
from importlib.metadata import entry_points
from typing import Protocol

GROUP = "anima_pipeline.failpoints"


class Hook(Protocol):
    def __call__(self, at: str, *, day: date, anima_id: str, step: str) -> None: ...


@cache
def hook() -> Hook | None:
    """The hook an installed entry point of GROUP names, None without one (looked up once)."""
    for found in entry_points(group=GROUP):
        loaded: Hook = found.load()
        return loaded
    return None


def reached(at: str, *, day: date, anima_id: str, step: str = "") -> None:
    """The night is at failpoint `at` (of `step`, for `anima_id` on `day`)."""
    installed = hook()
    if installed is not None:
        installed(at, day=day, anima_id=anima_id, step=step)

"""Library swaps for the offline heuristics (the figures in docs/decisions.md, "Library
decisions"): a library patched in for our code in this one process, then another
benchmark run exactly as it would run alone, so before (SWAP none) and after compare directly.

Run:  .venv/bin/python -m benchmarks.library_swaps SWAP [--store URL] [-- MODULE [ARGS...]]
      SWAP: none | snowball | pysbd | jieba (install the library first, e.g.
      `.venv/bin/pip install snowballstemmer pysbd jieba`: none is a dependency)
      --store URL: first build a lexical store there (a scratch database, dropped and created):
        LoCoMo dev and MemoryBank imported, every night 2022-01-21 ... 2023-10-23 offline with
        `runner.run_days` in this process (one worker, so the patch applies), ANIMA_EMBEDDER=none
      MODULE: e.g. benchmarks.light_sleep_coverage, benchmarks.deep_sleep_actions --from-store URL,
        benchmarks.recall_at_k --from-store URL --share 0.3

The swaps, each replacing ours only where the library does the same job:

* ``snowball``: snowballstemmer's English stemmer for deep sleep's suffix stemmer
  (``night/steps/deep/merges.py`` ``_stem``, which feeds ``memory_terms``), the preference words stemmed
  the same way;
* ``pysbd``: pysbd's English segmenter for ``text/sentences.py`` ``split_sentences`` on text
  without CJK characters, in both modes (memories and chat messages); ours keeps CJK text
  (pysbd has no segmenter for mixed Chinese-English chat);
* ``jieba``: jieba's words instead of character bigrams in ``memory_terms`` for CJK text.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import pkgutil
import runpy
import sys
import time
from collections.abc import Callable
from datetime import date, timedelta

FIRST, LAST = date(2022, 1, 21), date(2023, 10, 23)


def swap_snowball() -> None:
    import snowballstemmer

    from anima_pipeline.night.steps.deep import merges as deep

    stemmer = snowballstemmer.stemmer("english")

    @functools.lru_cache(maxsize=100_000)
    def stem(word: str) -> str:
        return str(stemmer.stemWord(word.removesuffix("'s")))

    deep._stem = stem  # type: ignore[assignment]
    deep._PREFERENCE_WORDS = frozenset(deep._PREFERENCE_WORDS | {stem(w) for w in deep._PREFERENCE_WORDS})


def swap_pysbd() -> None:
    import pysbd

    import anima_pipeline.night.steps as steps
    import anima_pipeline.text as text_pkg
    from anima_pipeline.text import sentences
    from anima_pipeline.text.similarity import has_cjk

    segmenter = pysbd.Segmenter(language="en", clean=False)
    ours = sentences.split_sentences

    def split(text: str, *, message: bool = False) -> list[str]:
        if has_cjk(text):
            return ours(text, message=message)
        return [s.strip() for s in segmenter.segment(text) if s.strip()]

    # every module of the engine that imported the function by name gets the swap too
    names = [f"anima_pipeline.text.{i.name}" for i in pkgutil.iter_modules(text_pkg.__path__)]
    names += [i.name for i in pkgutil.walk_packages(steps.__path__, "anima_pipeline.night.steps.")]
    for name in names:
        module = importlib.import_module(name)
        if getattr(module, "split_sentences", None) is ours:
            module.split_sentences = split  # type: ignore[attr-defined]


def swap_jieba() -> None:
    import jieba

    from anima_pipeline.night.steps.deep import merges as deep
    from anima_pipeline.text.similarity import has_cjk, normalize_content

    jieba.setLogLevel(60)
    ours = deep.memory_terms

    def memory_terms(text: str) -> frozenset[str]:
        norm = normalize_content(text)
        if not has_cjk(norm):
            return ours(text)
        words = (w.strip() for w in jieba.lcut(norm))
        return frozenset(w for w in words if w and not deep._STOP_CHARS_CN.fullmatch(w))

    deep.memory_terms = memory_terms  # type: ignore[assignment]


SWAPS: dict[str, Callable[[], None]] = {
    "none": lambda: None,
    "snowball": swap_snowball,
    "pysbd": swap_pysbd,
    "jieba": swap_jieba,
}


def build_store(url: str) -> None:
    """Import the evaluation archives into a fresh database at `url` and sleep every night."""
    from anima_pipeline.config import Settings
    from anima_pipeline.night.runner import run_days
    from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
    from anima_pipeline.store.db import Database
    from anima_pipeline.store.events import Audit
    from benchmarks.recall_scale import drop_database, ensure_database
    from testkit.data import data_dir

    drop_database(url)
    ensure_database(url)
    settings = Settings(embedder={"kind": "none"}, database_url=url)
    started = time.perf_counter()
    files = [
        data_dir() / "locomo" / "dev.archive.jsonl",
        *sorted((data_dir() / "memorybank").glob("*.archive.jsonl")),
    ]
    with Database(url) as db:
        for path in files:
            with db.transaction() as conn, path.open(encoding="utf-8") as lines:
                audit = Audit(conn=conn, anima_id="", run_id="swap-import", step="import")
                import_records(conn, parse_lines(lines, str(path)), audit, ImportStats())
        days = [FIRST + timedelta(n) for n in range((LAST - FIRST).days + 1)]
        run_days(db, settings, days, workers=1)  # in this process: the swap applies
    print(f"store: {len(days)} nights slept in {time.perf_counter() - started:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    # what follows "--" is the benchmark's own command line, left for it to parse
    cut = argv.index("--") if "--" in argv else len(argv)
    own, command = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], usage="%(prog)s SWAP [--store URL] [-- MODULE ARGS...]"
    )
    parser.add_argument("swap", choices=sorted(SWAPS))
    parser.add_argument("--store", metavar="DATABASE_URL", help="build a slept lexical store there first")
    args = parser.parse_args(own)
    SWAPS[args.swap]()
    if args.store:
        build_store(args.store)
    if command:
        sys.argv = command
        runpy.run_module(command[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

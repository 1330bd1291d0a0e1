"""A store's content, table by table, as lines that compare across two builds: what a refactor
must leave byte-identical (docs/architecture.md, "Behaviour kept").

Run:  .venv/bin/python -m benchmarks.store_digest DATABASE_URL [--out FILE] [--since ISO]
      .venv/bin/python -m benchmarks.store_digest --compare FILE_A FILE_B

Every table of the store's `public` schema is read in primary-key order. What differs between
two builds of the same input without meaning anything is normalised: timestamps written by the
wall clock (at or after `--since`, default six hours ago) become `<wall>`, run ids and hex ids
become `<run>`, and the `duration_s` / `*_ms` / `lease_until` style fields of JSON stats become
`<t>`. One line per table with its row count and a sha256 of its normalised rows, then the
rows themselves (`--rows`) for a diff.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

_RUN = re.compile(
    r"\b(?:(?:run|guard-revert|promote|revert|replay|forget|swap-import|import)-[0-9a-f]{8,32}"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"
)
_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$")
_TIMED = re.compile(r"(duration|_ms$|_s$|elapsed|lease|seconds|finished|started|heartbeat)")


def _norm(value: Any, since: datetime, key: str = "") -> Any:
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
        return "<wall>" if stamp >= since else stamp.isoformat()
    if isinstance(value, str):
        if _ISO.match(value):  # a timestamp inside JSON (an audit event's before / after)
            return _norm(datetime.fromisoformat(value), since, key)
        return _RUN.sub("<run>", value)
    if isinstance(value, dict):
        return {k: ("<t>" if _TIMED.search(k) else _norm(v, since, k)) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_norm(v, since, key) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    return value


def digest(url: str, since: datetime) -> list[str]:
    lines: list[str] = []
    with psycopg.connect(url, row_factory=dict_row) as conn:
        tables = [
            r["table_name"]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                "AND table_type = 'BASE TABLE' ORDER BY table_name"
            )
        ]
        for table in tables:
            keys = [
                r["attname"]
                for r in conn.execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
                    (table,),
                )
            ]
            order = ", ".join(f'"{k}"' for k in keys) or "1"
            cols = [
                r["column_name"]
                for r in conn.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = "
                    "'public' AND table_name = %s AND data_type NOT IN ('tsvector', 'USER-DEFINED') "
                    "ORDER BY ordinal_position",
                    (table,),
                )
            ]
            select = ", ".join(f'"{c}"' for c in cols)
            rows = [
                json.dumps(_norm(dict(r), since), sort_keys=True, ensure_ascii=False, default=str)
                for r in conn.execute(f'SELECT {select} FROM "{table}" ORDER BY {order}')  # noqa: S608
            ]
            sha = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
            lines.append(f"TABLE {table} rows={len(rows)} sha={sha}")
            lines.extend(f"  {table}: {row}" for row in rows)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="the store's database URL")
    parser.add_argument("--out", type=Path, help="write the digest there (default: stdout)")
    parser.add_argument("--since", help="wall-clock timestamps from this ISO time on are normalised")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two digests")
    args = parser.parse_args(argv)
    if args.compare:
        a, b = (p.read_text().splitlines() for p in args.compare)
        heads_a = [line for line in a if line.startswith("TABLE ")]
        heads_b = [line for line in b if line.startswith("TABLE ")]
        for ha, hb in zip(heads_a, heads_b, strict=False):
            print(("same  " if ha == hb else "DIFF  ") + ha + ("" if ha == hb else f"  <>  {hb}"))
        if len(heads_a) != len(heads_b):
            print(f"DIFF  tables: {len(heads_a)} against {len(heads_b)}")
        return 0 if a == b else 1
    if not args.url:
        parser.error("give a DATABASE_URL or --compare A B")
    since = datetime.fromisoformat(args.since) if args.since else datetime.now(UTC) - timedelta(hours=6)
    text = "\n".join(digest(args.url, since)) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

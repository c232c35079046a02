"""Weight formats of quantised checkpoints: :class:`QuantSpec` (bytes per element: :mod:`simcast.core.dtypes`).

:class:`QuantSpec` is the frozen sub-spec :class:`simcast.core.model_spec.ModelSpec` carries when a
config has a ``quantization_config`` (or ``--quantization`` sets one); ``None`` keeps every weight in
the model dtype. The constructor validates and never touches files.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.dtypes import WEIGHT_FORMAT_BYTES
from simcast.core.errors import require


@dataclass(frozen=True, kw_only=True)
class QuantSpec:
    """Weight formats read from ``quantization_config``.

    ``expert_format`` applies to routed (and shared) expert GEMMs, ``dense_format``
    to the other linear layers (attention, dense MLP); embeddings, lm_head, norms
    and the router stay in the model dtype (``modules_to_not_convert``).
    """

    method: str
    expert_format: str
    dense_format: str
    block: tuple[int, int] = (0, 0)
    source: str = "quantization_config"  # where the formats came from (config.json, or --quantization)

    def __post_init__(self) -> None:
        for f in ("expert_format", "dense_format"):
            v = getattr(self, f)
            require(v in WEIGHT_FORMAT_BYTES, f"model.quantization.{f}", v, f"allowed: {sorted(WEIGHT_FORMAT_BYTES)}")

    @property
    def expert_bytes(self) -> float:
        return WEIGHT_FORMAT_BYTES[self.expert_format]

    @property
    def dense_bytes(self) -> float:
        return WEIGHT_FORMAT_BYTES[self.dense_format]

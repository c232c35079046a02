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
    ``qkv_format`` / ``o_format`` ("": ``dense_format``): the attention's input projections (q, k, v; MLA's
    q_a, q_b, kv_a) and its output projection when the checkpoint keeps them in another format (NVIDIA's
    NVFP4 DeepSeek checkpoints exclude the q/kv projections, AMD's MXFP4 ones the whole ``self_attn``).
    """

    method: str
    expert_format: str
    dense_format: str
    block: tuple[int, int] = (0, 0)
    source: str = "quantization_config"  # where the formats came from (config.json, or --quantization)
    qkv_format: str = ""
    o_format: str = ""

    def __post_init__(self) -> None:
        for f in ("expert_format", "dense_format", "qkv_format", "o_format"):
            v = getattr(self, f)
            if f in ("qkv_format", "o_format") and v == "":
                continue
            require(v in WEIGHT_FORMAT_BYTES, f"model.quantization.{f}", v, f"allowed: {sorted(WEIGHT_FORMAT_BYTES)}")

    @property
    def qkv(self) -> str:
        """Format of the attention's input projections."""
        return self.qkv_format or self.dense_format

    @property
    def o(self) -> str:
        """Format of the attention's output projection."""
        return self.o_format or self.dense_format

    @property
    def expert_bytes(self) -> float:
        return WEIGHT_FORMAT_BYTES[self.expert_format]

    @property
    def dense_bytes(self) -> float:
        return WEIGHT_FORMAT_BYTES[self.dense_format]

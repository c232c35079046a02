"""Weight formats of quantised checkpoints: bytes per weight element and :class:`QuantSpec`.

:class:`QuantSpec` is the frozen sub-spec :class:`simcast.core.specs.ModelSpec` carries when a
config has a ``quantization_config`` (or ``--quantization`` sets one); ``None`` keeps every weight in
the model dtype. The constructor validates and never touches files.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require

# Bytes per weight element, scales included:
#   fp8 block-scaled: 1 byte + one fp32 scale per 128x128 block (DeepSeek-V3 / Qwen3-FP8 checkpoints)
#   mxfp4: 4-bit e2m1 values + one 8-bit e8m0 scale per 32 values (OCP MX spec) = 4.25 bits
WEIGHT_FORMAT_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp32": 4.0,
    "fp8": 1.0,
    "fp8_block": 1.0 + 4.0 / (128 * 128),
    "mxfp4": 4.25 / 8,
}


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

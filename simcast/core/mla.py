"""Multi-head latent attention (DeepSeek-V2/V3): the frozen sub-spec of :class:`simcast.core.model_spec.ModelSpec`.

Element counts, not bytes; the constructor validates and never touches files.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require


@dataclass(frozen=True, kw_only=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2/V3).

    Queries: ``hidden -> q_lora_rank -> heads·(qk_nope + qk_rope)`` (``q_lora_rank`` 0:
    one projection). Keys/values: ``hidden -> kv_lora_rank + qk_rope``; the cache keeps
    that compressed latent (``kv_lora_rank + qk_rope_head_dim`` elements per token per
    layer), and ``kv_b_proj`` expands it to ``heads·(qk_nope + v_head)``.
    """

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def __post_init__(self) -> None:
        require(self.q_lora_rank >= 0, "model.mla.q_lora_rank", self.q_lora_rank, "must be >= 0 (0: no q compression)")
        for f in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            v = getattr(self, f)
            require(isinstance(v, int) and v > 0, f"model.mla.{f}", v, "a positive integer is required")

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_width(self) -> int:
        """Elements per token per layer in the compressed KV cache."""
        return self.kv_lora_rank + self.qk_rope_head_dim

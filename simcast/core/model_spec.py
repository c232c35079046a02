"""The model spec: a decoder-only transformer's shape, read from its HF ``config.json``.

Units are in the field names. The constructor validates and never touches files.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.errors import require
from simcast.core.linear_attention import LinearAttentionSpec
from simcast.core.mla import MLASpec
from simcast.core.moe import MoESpec
from simcast.core.quant import QuantSpec

LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer (Llama / Qwen2 / Qwen3 / Mistral; MoE: Mixtral, Qwen3-MoE,
    DeepSeek-V3, gpt-oss).

    ``intermediate_size`` is the dense MLP width (DeepSeek's first dense layers); MoE
    layers use ``moe``. ``layer_types``: per layer ``"full_attention"``,
    ``"sliding_attention"`` (window ``sliding_window`` tokens) or ``"chunked_attention"`` (Llama-4's
    chunked local attention: a query sees only the keys of its own ``attention_chunk_size``-token chunk) or
    ``"linear_attention"`` (Qwen3-Next's Gated DeltaNet, shaped by ``linear``: a constant state, no KV);
    empty = all full. ``attn_output_gate``: the full-attention q_proj also yields a per-head sigmoid gate on
    the attention output (Qwen3-Next).
    ``attention_sinks``: one learned sink logit per head (gpt-oss). ``o_proj_bias``:
    o_proj has a bias (gpt-oss). ``num_mtp_layers``: DeepSeek's multi-token-prediction
    modules (weights counted in the checkpoint total, not run by default). ``encoder_params``: a multimodal
    checkpoint's vision tower and projector (Llama-4), held in memory on the first stage (TP-sharded, vLLM's
    default ``mm_encoder_tp_mode`` "weights") and never run on a text request.
    """

    name: str
    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    qk_norm: bool = False
    attention_bias: bool = False
    dtype: str = "bf16"
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    quant: QuantSpec | None = None
    layer_types: tuple[str, ...] = ()
    sliding_window: int = 0
    attention_chunk_size: int = 0
    linear: LinearAttentionSpec | None = None
    attn_output_gate: bool = False
    attention_sinks: bool = False
    o_proj_bias: bool = False
    num_mtp_layers: int = 0
    encoder_params: int = 0

    def __post_init__(self) -> None:
        for f in (
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
        ):
            v = getattr(self, f)
            require(isinstance(v, int) and v > 0, f"model.{f}", v, "a positive integer is required")
        require(
            self.num_heads % self.num_kv_heads == 0,
            "model.num_key_value_heads",
            self.num_kv_heads,
            f"must divide num_attention_heads={self.num_heads}",
        )
        require(self.dtype in DTYPE_BYTES, "model.dtype", self.dtype, f"allowed: {sorted(DTYPE_BYTES)}")
        require(
            not self.layer_types or len(self.layer_types) == self.num_layers,
            "model.layer_types",
            len(self.layer_types),
            f"needs one entry per layer ({self.num_layers})",
        )
        bad = sorted(set(self.layer_types) - set(LAYER_TYPES))
        require(not bad, "model.layer_types", bad, f"allowed: {', '.join(LAYER_TYPES)}")
        require(
            "sliding_attention" not in self.layer_types or self.sliding_window > 0,
            "model.sliding_window",
            self.sliding_window,
            "must be > 0 when a layer uses sliding_attention",
        )
        require(
            "linear_attention" not in self.layer_types or self.linear is not None,
            "model.linear",
            self.linear,
            "is required when a layer uses linear_attention",
        )
        require(
            "chunked_attention" not in self.layer_types or self.attention_chunk_size > 0,
            "model.attention_chunk_size",
            self.attention_chunk_size,
            "must be > 0 when a layer uses chunked_attention",
        )

    def is_sliding(self, layer: int) -> bool:
        return bool(self.layer_types) and self.layer_types[layer] == "sliding_attention"

    def is_chunked(self, layer: int) -> bool:
        return bool(self.layer_types) and self.layer_types[layer] == "chunked_attention"

    def is_linear(self, layer: int) -> bool:
        return bool(self.layer_types) and self.layer_types[layer] == "linear_attention"

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and self.moe.is_moe_layer(layer)

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

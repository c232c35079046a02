"""KV-cache elements and bytes per token and layer on one rank.

GQA: ``2 · kv_heads/tp · head_dim`` elements; MLA: the compressed ``kv_lora_rank +
qk_rope_head_dim`` (576 for DeepSeek-V3), **not** divided by tp (every TP rank keeps the full
latent, as vLLM and SGLang do); ``kv_cache_dtype`` sets the bytes. Sliding-window layers keep at
most the window.
"""

from __future__ import annotations

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.model_spec import ModelSpec
from simcast.core.shards import ShardedDims


def kv_elements_per_token_layer(model: ModelSpec, sd: ShardedDims) -> int:
    """Cache elements one token occupies in one layer on one rank (K and V, or MLA's latent)."""
    if model.mla is not None:
        return model.mla.cache_width
    return 2 * sd.kv_heads * model.head_dim


def kv_dtype_bytes(model: ModelSpec, kv_cache_dtype: str) -> int:
    """``auto`` = the model dtype (vLLM's default), else ``bf16`` / ``fp8``."""
    return model.dtype_bytes if kv_cache_dtype == "auto" else DTYPE_BYTES[kv_cache_dtype]


def sliding_tokens(model: ModelSpec, layer: int, tokens_per_request: float) -> float:
    """Cache tokens a request keeps in ``layer``: all, or the window on a sliding layer (vLLM's hybrid allocator)."""
    return min(tokens_per_request, model.sliding_window) if model.is_sliding(layer) else tokens_per_request

"""KV-cache elements and bytes per token and layer on one rank.

GQA: ``2 · kv_heads/tp · head_dim`` elements; MLA: the compressed ``kv_lora_rank +
qk_rope_head_dim`` (576 for DeepSeek-V3), **not** divided by tp (every TP rank keeps the full
latent, as vLLM and SGLang do); ``kv_cache_dtype`` sets the bytes. Sliding-window layers keep at
most the window, chunked-local layers at most the chunk:

- vLLM (``vllm/v1/core/single_type_kv_cache_manager.py``): ``SlidingWindowManager.get_num_skipped_tokens``
  is ``num_computed_tokens - sliding_window + 1`` and ``remove_skipped_blocks`` returns those blocks to the
  pool (a null block stands in); ``ChunkedLocalAttentionManager`` frees every block before the current
  chunk's start. The hybrid allocator gives each attention kind its own block group.
- SGLang (``python/sglang/srt/configs/model_config.py``: ``is_hybrid_swa_model`` lists
  ``Llama4ForConditionalGeneration`` and ``GptOssForCausalLM``; ``get_hybrid_layer_ids`` puts Llama-4's
  layers ``(i + 1) % 4 != 0`` in the SWA pool, the chunk acting as the window; ``mem_cache/swa_memory_pool.py``
  frees SWA tokens that leave the window).

Both bound a request's tokens in such a layer by the window (chunk); the cost model charges that bound
(a chunked layer may hold fewer: only the current chunk's tokens).
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
    """Cache tokens a request keeps in ``layer``: all, the window on a sliding layer, at most the chunk on a
    chunked-local layer (module docstring: vLLM's hybrid allocator, SGLang's SWA pool)."""
    if model.is_sliding(layer):
        return min(tokens_per_request, model.sliding_window)
    if model.is_chunked(layer):
        return min(tokens_per_request, model.attention_chunk_size)
    if model.is_linear(layer):
        return 0.0  # a constant state instead: linear_state_bytes
    return tokens_per_request


def linear_state_bytes(model: ModelSpec, layer: int, tp: int) -> int:
    """Bytes one request holds in ``layer`` on one TP rank whatever its length: a linear-attention layer's
    conv window and recurrent state (:mod:`simcast.core.linear_attention`); 0 for an attention layer.

    vLLM: a ``MambaSpec`` group, one state slot per request (``vllm/v1/core/single_type_kv_cache_manager.py``
    ``MambaManager``), its page sized to the attention groups' page; SGLang: ``HybridReqToTokenPool`` with a
    ``MambaPool`` of ``max_mamba_cache_size`` slots (``python/sglang/srt/mem_cache/memory_pool.py``). Both free
    a slot when its request finishes, so admission counts one state per running request."""
    if model.linear is None or not model.is_linear(layer):
        return 0
    return model.linear.state_bytes(tp, model.dtype_bytes)

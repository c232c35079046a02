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

FP4 KV caches (``--kv-cache-dtype nvfp4``) hold 4-bit e2m1 values packed two to a byte plus one 1-byte scale
per 16 values: 0.5625 bytes per element (:data:`simcast.core.dtypes.KV_CACHE_BYTES`), so a layer's bytes per
token are fractional multiples of its elements (MLA's 576-wide latent: 288 + 36 = 324 bytes; a GQA layer of
8 KV heads x 128: 2048 elements, 1152 bytes). The engines' layouts:

- SGLang (``python/sglang/srt/server_args.py``@001067ff ``--kv-cache-dtype`` choices ``nvfp4``,
  ``fp4_mx_block16``; ``fp4_e2m1`` is refused there as deprecated, pointing to ``fp4_mx_block16``:
  ``python/sglang/srt/layers/quantization/fp4_kv_cache_quant_method.py``@02719cd1 ``resolve_kv_cache_quant``).
  ``NVFP4KVCacheMethod.create_buffers`` keeps per layer ``(tokens, heads, head_dim // 2)`` uint8 values and
  ``(tokens, heads, head_dim // 16)`` fp8-e4m3 scales for K and for V, plus one fp32 global scale per layer;
  ``FP4MXBlock16KVCacheMethod`` the same bytes with uint8 exponent scales; the MLA pool
  (``python/sglang/srt/mem_cache/memory_pool.py`` ``MLATokenToKVPoolFP4``) ``(tokens, 1, 576 // 2)`` values and
  ``(tokens, 576 // 16)`` scales. NVFP4 runs on SM100/SM120 only ("Supported on SM100 and SM120").
- vLLM (``vllm/config/cache.py``@002f10e0 ``CacheDType``: ``nvfp4``, ``nvfp4_4over6`` "uses the NVFP4 layout",
  and ``nvfp4_ds_mla`` for DeepSeek's MLA).
- TensorRT-LLM: ``QuantConfig.kv_cache_quant_algo = QuantAlgo.NVFP4`` (from a checkpoint's ``hf_quant_config.json``
  ``kv_cache_quant_algo`` or ``kv_cache_config.dtype: nvfp4``; FP4 values and FP8 scales per 16, as its NVFP4
  weights; seen in its LLM-API tests through the code index, its file@commit not re-read here).

The per-layer fp32 global scales (8 bytes a layer) and the pool-wide scratch some paths add (SGLang's NVFP4
prefill dequantises into one shared FP8 workspace) are not per-token-per-layer bytes and are left out.
"""

from __future__ import annotations

from simcast.core.dtypes import FP4_KV_CACHE_DTYPES, KV_CACHE_BYTES
from simcast.core.model_spec import ModelSpec
from simcast.core.shards import ShardedDims

KV_CACHE_DTYPES: tuple[str, ...] = ("auto", "bf16", "fp8", *FP4_KV_CACHE_DTYPES)
"""The ``--kv-cache-dtype`` values simcast models (the engines' spellings: SGLang ``fp8_e4m3`` / ``nvfp4``,
vLLM ``fp8`` / ``nvfp4``, TensorRT-LLM ``kv_cache_config.dtype``)."""


def is_fp4_kv(kv_cache_dtype: str) -> bool:
    """Whether ``kv_cache_dtype`` stores 4-bit values (an FP4 KV cache)."""
    return kv_cache_dtype in FP4_KV_CACHE_DTYPES


def kv_elements_per_token_layer(model: ModelSpec, sd: ShardedDims) -> int:
    """Cache elements one token occupies in one layer on one rank (K and V, or MLA's latent)."""
    if model.mla is not None:
        return model.mla.cache_width
    return 2 * sd.kv_heads * model.head_dim


def kv_dtype_bytes(model: ModelSpec, kv_cache_dtype: str) -> float:
    """Bytes per cache element, scales included: ``auto`` = the model dtype (vLLM's default), else ``bf16`` /
    ``fp8`` (whole bytes, returned as an int) or ``nvfp4`` (0.5625: a 4-bit value and 1/16 of a 1-byte scale)."""
    if kv_cache_dtype == "auto":
        return model.dtype_bytes
    b = KV_CACHE_BYTES[kv_cache_dtype]
    return int(b) if b == int(b) else b


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

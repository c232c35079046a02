"""Weights of one decoder layer on one rank (bytes): attention (GQA or MLA), dense MLP or routed experts.

- Experts: ``E / ep`` experts per rank, each expert's FFN width split ``/ moe_tp``
  (:func:`simcast.core.moe_memory.moe_shard`); every rank holds its experts' weights whatever
  tokens it gets (weights count *all* experts).
- Shared experts and the dense MLP of DeepSeek's first layers: TP-sharded ``/ tp`` (vLLM).
- Router: replicated, model dtype. Attention: q/o and kv_b sharded ``/ tp``; MLA's q_a and
  kv_a (the down projections) are replicated on every TP rank (vLLM's ReplicatedLinear).
- Weight bytes per element from the config's ``quantization_config`` (:mod:`simcast.core.quant`),
  else the model dtype.
"""

from __future__ import annotations

from simcast.core.assumption import WeightFormat
from simcast.core.dtypes import WEIGHT_FORMAT_BYTES
from simcast.core.model_spec import ModelSpec
from simcast.core.moe_memory import moe_shard
from simcast.core.shards import ShardedDims
from simcast.core.specs import ParallelSpec


def _fmt_bytes(model: ModelSpec, expert: bool) -> float:
    q = model.quant
    if q is None:
        return float(model.dtype_bytes)
    return q.expert_bytes if expert else q.dense_bytes


def attention_rank_params(model: ModelSpec, sd: ShardedDims, layer: int = 0) -> tuple[int, int]:
    """(GEMM weights, other params) of one layer's attention on one TP rank (a linear-attention layer: its
    projections split ``/ tp``, conv, gates and norm as other params)."""
    h, tp = model.hidden_size, sd.tp
    if model.linear is not None and model.is_linear(layer):
        la = model.linear
        gemm = h * (2 * la.key_dim + 2 * la.value_dim + 2 * la.num_v_heads) // tp + la.value_dim // tp * h
        other = (la.conv_dim * la.conv_kernel + 2 * la.num_v_heads) // tp + la.v_head_dim
        return gemm, other
    if model.mla is not None:
        a, hr = model.mla, model.num_heads // tp
        gemm = h * a.q_lora_rank + a.q_lora_rank * hr * a.qk_head_dim if a.q_lora_rank else h * hr * a.qk_head_dim
        gemm += h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * hr * (a.qk_nope_head_dim + a.v_head_dim)
        gemm += hr * a.v_head_dim * h
        return gemm, a.q_lora_rank + a.kv_lora_rank
    gemm = h * sd.qkv_width + sd.q_width * h + (h * sd.q_width if model.attn_output_gate else 0)
    other = (
        (sd.qkv_width if sd.attention_bias else 0)
        + (h if model.o_proj_bias else 0)
        + (2 * sd.head_dim if sd.qk_norm else 0)
        + (sd.q_heads if model.attention_sinks else 0)
    )
    return gemm, other


def _attention_gemm_bytes(model: ModelSpec, sd: ShardedDims, gemm: int) -> float:
    """Bytes of one rank's ``gemm`` attention projection weights: the dense format, or, when the checkpoint keeps
    the q/kv input projections or the output projection in another format (``QuantSpec.qkv_format`` /
    ``o_format``), each part in its own (o_proj: ``heads/tp · v_head_dim · hidden`` elements)."""
    q = model.quant
    if q is None or not (q.qkv_format or q.o_format):
        return gemm * _fmt_bytes(model, False)
    h = model.hidden_size
    o = model.num_heads // sd.tp * model.mla.v_head_dim * h if model.mla is not None else sd.q_width * h
    return (gemm - o) * WEIGHT_FORMAT_BYTES[q.qkv] + o * WEIGHT_FORMAT_BYTES[q.o]


def layer_weight_bytes_at(model: ModelSpec, sd: ShardedDims, par: ParallelSpec, layer: int) -> float:
    """Weights of decoder layer ``layer`` on one rank (bytes)."""
    b = model.dtype_bytes
    gemm, other = attention_rank_params(model, sd, layer)
    w = _attention_gemm_bytes(model, sd, gemm) + (other + 2 * model.hidden_size) * b
    h = model.hidden_size
    if not model.is_moe_layer(layer):
        return w + 3 * h * sd.intermediate * _fmt_bytes(model, False)
    m, s = model.moe, moe_shard(model, par)
    assert m is not None
    expert = 3 * h * s.expert_intermediate * _fmt_bytes(model, True) + (
        (2 * s.expert_intermediate + h) * b if m.expert_bias else 0
    )
    router = (h * m.num_experts + (m.num_experts if m.router_bias else 0)) * b
    return w + s.experts_local * expert + router + 3 * h * s.shared_intermediate * _fmt_bytes(model, True)


def weight_format(model: ModelSpec) -> WeightFormat | None:
    """Each layer role's weight format (bytes per element from ``WEIGHT_FORMAT_BYTES``); None unquantised."""
    q = model.quant
    if q is None:
        return None
    return WeightFormat(
        source=q.source,
        method=q.method,
        moe=model.moe is not None,
        expert_format=q.expert_format,
        expert_bytes_per_elem=WEIGHT_FORMAT_BYTES[q.expert_format],
        dense_format=q.dense_format,
        dense_bytes_per_elem=WEIGHT_FORMAT_BYTES[q.dense_format],
        activation_dtype=model.dtype,
    )

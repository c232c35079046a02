"""Stage-local modules on the meta device, with per-rank (TP-sharded) shapes.

A stage module holds only what its stage runs: the vocab-parallel embedding on
stage 0, its decoder layers, and the final norm, last-token gather, lm_head,
logits gather and sampler on the last stage. Decoder layers are built from one
representative layer per structural key (the model's very first layer, which
starts the residual stream, differs from the others); the trace of the
representative layer is replayed for the stage's layer count. Ops never cross
a stage boundary. Importing this module imports torch.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from simcast.trace import linear_attention, mla, moe, ops
from simcast.trace.key import StageKey
from simcast.trace.quant import Linear

_TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.float8_e4m3fn}


class DecoderLayer(nn.Module):
    """One decoder layer as vLLM runs it on one TP rank: GQA or MLA attention, dense or MoE MLP."""

    def __init__(self, k: StageKey, starts_residual: bool, kind: str = "dense") -> None:
        super().__init__()
        dt, d = _TORCH_DTYPE[k.dtype], k.head_dim
        self.k, self.starts_residual = k, starts_residual
        self.sliding = "+sliding" in kind
        self.chunked = "+chunked" in kind
        self.q_size, self.kv_size = k.q_heads * d, k.kv_heads * d
        mk: dict[str, Any] = {"device": "meta", "dtype": dt}
        fmt = k.dense_format
        self.input_layernorm = nn.Parameter(torch.empty(k.hidden_size, **mk))
        self.mla = mla.MLAAttention(k, **mk) if k.kv_lora_rank else None
        self.gdn = linear_attention.GatedDeltaNet(k, **mk) if "+linear" in kind else None
        self.gate_size = self.q_size if k.attn_output_gate else 0
        if self.mla is None and self.gdn is None:
            width = self.q_size + self.gate_size + 2 * self.kv_size
            self.qkv_proj = Linear(k.hidden_size, width, k.attention_bias, fmt, **mk)
            self.o_proj = Linear(self.q_size, k.hidden_size, k.o_proj_bias, fmt, **mk)
        self.q_norm = nn.Parameter(torch.empty(d, **mk)) if k.qk_norm else None
        self.k_norm = nn.Parameter(torch.empty(d, **mk)) if k.qk_norm else None
        self.post_attention_layernorm = nn.Parameter(torch.empty(k.hidden_size, **mk))
        self.moe = moe.MoEBlock(k, **mk) if kind.startswith("moe") else None
        if self.moe is None:
            inter = k.dense_intermediate or k.intermediate  # per rank of the group the dense MLP runs in
            self.gate_up_proj = Linear(k.hidden_size, 2 * inter, False, fmt, **mk)
            self.down_proj = Linear(inter, k.hidden_size, False, fmt, **mk)

    def forward(self, positions, hidden, residual, k_cache, v_cache, query_lens, context_lens):
        k, eps = self.k, self.k.rms_norm_eps
        if self.starts_residual:
            residual, hidden = hidden, ops.rms_norm(hidden, self.input_layernorm, eps)
        else:
            hidden, residual = ops.fused_add_rms_norm(hidden, residual, self.input_layernorm, eps)
        if self.mla is not None:
            out = self.mla(positions, hidden, k_cache, query_lens, context_lens)
        elif self.gdn is not None:
            out = self.gdn(hidden, query_lens, context_lens)
        else:
            out = self._gqa(positions, hidden, k_cache, v_cache, query_lens, context_lens)
        if self.moe is None and k.dense_mode:  # the dense MLP outside the attention-TP group
            return self._dense_elsewhere(out, residual)
        if k.tp > 1:
            out = ops.all_reduce(out, k.tp)
        hidden, residual = ops.fused_add_rms_norm(out, residual, self.post_attention_layernorm, eps)
        if self.moe is not None:
            return self.moe(hidden), residual
        out = self.down_proj(ops.silu_and_mul(self.gate_up_proj(hidden)))
        if k.tp > 1:
            out = ops.all_reduce(out, k.tp)
        return out, residual

    def _dense_elsewhere(self, out, residual):
        """SGLang's dense layer with DP attention (:mod:`simcast.engines.sglang_layers`): ``gathered`` (FULL):
        the attention output summed into every DP rank's gathered tokens over the stage's ranks, the MLP sharded
        over them, all-reduced, this rank's rows copied back; ``scattered`` (``--moe-dense-tp-size 1``): the
        attention output reduce-scattered over the attention-TP group, the MLP unsharded on those rows, no
        all-reduce, the rows all-gathered back. The residual add runs on the gathered / scattered rows (traced as
        one norm over them; the engine's residual copy is left out)."""
        k, eps = self.k, self.k.rms_norm_eps
        if k.dense_mode == "gathered":
            g = k.dense_group // k.tp  # DP ranks whose tokens are gathered
            x = ops.dp_comm(out, out, "gather_rows", k.dense_group, g, "dp")
            x = ops.rms_norm(x, self.post_attention_layernorm, eps)
            y = self.down_proj(ops.silu_and_mul(self.gate_up_proj(x)))
            y = ops.dp_comm(y, y, "all_reduce", k.dense_group, 1, "dp")
            return ops.dp_comm(y, y, "scatter_rows", 1, g, "dp"), residual
        x = ops.dp_comm(out, out, "reduce_scatter_rows", k.tp, k.tp, "tp")
        x = ops.rms_norm(x, self.post_attention_layernorm, eps)
        y = self.down_proj(ops.silu_and_mul(self.gate_up_proj(x)))
        return ops.dp_comm(y, residual, "all_gather_rows", k.tp, k.tp, "tp"), residual

    def _gqa(self, positions, hidden, k_cache, v_cache, query_lens, context_lens):
        k, eps, d = self.k, self.k.rms_norm_eps, self.k.head_dim
        if self.gate_size:  # Qwen3-Next: q_proj yields q and a per-channel output gate
            q, gate, kk, v = self.qkv_proj(hidden).split([self.q_size, self.gate_size, self.kv_size, self.kv_size], -1)
        else:
            q, kk, v = self.qkv_proj(hidden).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        if self.q_norm is not None:  # Qwen3: per-head RMSNorm on q and k
            t = q.shape[0]
            q = ops.rms_norm(q.view(t, k.q_heads, d), self.q_norm, eps).view(t, self.q_size)
            kk = ops.rms_norm(kk.view(t, k.kv_heads, d), self.k_norm, eps).view(t, self.kv_size)
        q, kk = ops.rope(positions, q, kk, d, k.rope_theta)
        ops.kv_cache_write(kk, v, k_cache, v_cache)
        if self.sliding:
            attn = ops.attention_sliding(
                q, k_cache, v_cache, query_lens, context_lens, 1.0 / math.sqrt(d), k.sliding_window
            )
        elif self.chunked:
            attn = ops.attention_chunked(
                q, k_cache, v_cache, query_lens, context_lens, 1.0 / math.sqrt(d), k.attention_chunk_size
            )
        else:
            attn = ops.attention(q, k_cache, v_cache, query_lens, context_lens, True, 1.0 / math.sqrt(d))
        if self.gate_size:
            attn = linear_attention.sigmoid_mul(attn, gate)
        return self.o_proj(attn)


class StageModule(nn.Module):
    """The stage-local forward: input_ids (stage 0) or hidden states in, ids or hidden states out."""

    def __init__(self, k: StageKey) -> None:
        super().__init__()
        mk: dict[str, Any] = {"device": "meta", "dtype": _TORCH_DTYPE[k.dtype]}
        self.k = k
        self.embed_tokens = nn.Parameter(torch.empty(k.vocab_shard, k.hidden_size, **mk)) if k.has_embedding else None
        kinds = k.layer_kinds or ("dense",) * k.traced_layers
        self.layers = nn.ModuleList(
            DecoderLayer(k, starts_residual=k.has_embedding and i == 0, kind=kinds[i]) for i in range(k.traced_layers)
        )
        self.norm = nn.Parameter(torch.empty(k.hidden_size, **mk)) if k.has_head else None
        vocab = k.head_vocab or k.vocab_shard  # per rank of the group the LM head runs in
        self.lm_head = nn.Linear(k.hidden_size, vocab, bias=False, **mk) if k.has_head else None

    def forward(self, x, residual, positions, k_cache, v_cache, query_lens, context_lens, logits_indices):
        k = self.k
        if self.embed_tokens is not None:
            hidden = ops.vocab_embedding(x, self.embed_tokens, k.tp)
            if k.tp > 1:
                hidden = ops.all_reduce(hidden, k.tp)
        else:
            hidden = x
        for layer in self.layers:
            hidden, residual = layer(positions, hidden, residual, k_cache, v_cache, query_lens, context_lens)
        if self.lm_head is None:
            return hidden, residual
        hidden, _ = ops.fused_add_rms_norm(hidden, residual, self.norm, k.rms_norm_eps)
        # vLLM/SGLang gather each request's last token before lm_head
        last = torch.index_select(hidden, 0, logits_indices)
        if k.head_mode == "gathered":  # SGLang without --enable-dp-lm-head (simcast.engines.sglang_layers)
            g = k.head_group // k.tp
            logits = self.lm_head(ops.dp_comm(last, last, "gather_rows", k.head_group, g, "dp"))
            logits = ops.dp_comm(logits, logits, "all_gather_cols", k.head_group, k.head_group, "dp")
            return ops.sample(ops.dp_comm(logits, logits, "scatter_rows", 1, g, "dp"))
        logits = self.lm_head(last)
        if k.tp > 1:
            logits = ops.all_gather(logits, k.tp)
        return ops.sample(logits)


# Example sizes for the symbolic dims; distinct and > 1 so dynamo neither
# specialises them nor relates them to each other.
EXAMPLE_DIMS = {"T": 37, "R": 5, "S": 411}


def example_inputs(k: StageKey) -> tuple[list, dict[str, tuple[int, str]]]:
    """Meta inputs of a stage module, and which (input position, dim) is which symbol."""
    T, R, S = EXAMPLE_DIMS["T"], EXAMPLE_DIMS["R"], EXAMPLE_DIMS["S"]
    dt = _TORCH_DTYPE[k.dtype]
    meta: dict[str, Any] = {"device": "meta"}
    if k.has_embedding:
        x, residual = torch.empty(T, dtype=torch.int64, **meta), None
    else:
        x = torch.empty(T, k.hidden_size, dtype=dt, **meta)
        residual = torch.empty(T, k.hidden_size, dtype=dt, **meta)
    inputs = [
        x,
        residual,
        torch.empty(T, dtype=torch.int64, **meta),
        torch.empty(S, k.kv_heads, k.head_dim, dtype=dt, **meta),
        torch.empty(S, k.kv_heads, k.head_dim, dtype=dt, **meta),
        torch.empty(R, dtype=torch.int32, **meta),
        torch.empty(R, dtype=torch.int32, **meta),
        torch.empty(R, dtype=torch.int64, **meta),
    ]
    roles = ["T", "T", "T", "S", "S", "R", "R", "R"]
    for t in inputs:
        if t is not None:
            torch._dynamo.mark_dynamic(t, 0)
    return inputs, {f"{i}": (0, r) for i, r in enumerate(roles)}

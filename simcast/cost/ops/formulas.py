"""The op table: every op name a trace can hold -> the formula giving its :class:`~simcast.cost.ops.op_work.OpWork`.

One explicit table, not registration by import side effect: a new op gets its formula in the module
of its concept and one row here (``tests/cost/test_cost_formulas.py`` checks the table covers every name
in :data:`simcast.trace.ir.KNOWN_OPS`). An op missing here is costed by :func:`simcast.cost.ops.compute.op_cost`
as memory-bound and labelled ``unregistered``.
"""

from __future__ import annotations

from collections.abc import Callable

from simcast.cost.ops import attention_ops, dense_ops, linear_attention, mla, moe, quant_linear
from simcast.cost.ops.op_work import CostContext, OpWork
from simcast.trace.ir import OpRecord

Formula = Callable[[OpRecord, CostContext], OpWork]

OP_FORMULAS: dict[str, Formula] = {
    # dense layer (simcast.trace.ops, aten)
    "linear": dense_ops.linear,
    "simcast::rms_norm": dense_ops.rms_norm,
    "simcast::fused_add_rms_norm": dense_ops.fused_add_rms_norm,
    "simcast::silu_and_mul": dense_ops.silu_and_mul,
    "simcast::rope": dense_ops.rope,
    "simcast::kv_cache_write": dense_ops.data_movement,
    "simcast::vocab_embedding": dense_ops.data_movement,
    "index_select": dense_ops.data_movement,
    "simcast::sample": dense_ops.sample,
    "simcast::all_reduce": dense_ops.all_reduce,
    "simcast::all_gather": dense_ops.all_gather,
    "simcast::dp_comm": dense_ops.dp_comm,
    # attention over the paged KV cache
    "simcast::attention": attention_ops.attention,
    "simcast::attention_sliding": attention_ops.attention_sliding,
    "simcast::attention_chunked": attention_ops.attention_chunked,
    # Gated DeltaNet linear attention (simcast.trace.linear_attention)
    "simcast::causal_conv1d": linear_attention.causal_conv1d,
    "simcast::gated_delta_rule": linear_attention.gated_delta_rule,
    "simcast::gated_rms_norm": dense_ops.gated_rms_norm,
    "simcast::sigmoid_mul": dense_ops.sigmoid_mul,
    # mixture of experts (simcast.trace.moe)
    "simcast::moe_topk": moe.moe_topk,
    "simcast::moe_dispatch": moe.dispatch_combine,
    "simcast::moe_combine": moe.dispatch_combine,
    "simcast::moe_experts": moe.moe_experts,
    # multi-head latent attention (simcast.trace.mla)
    "simcast::mla_cache_write": mla.mla_cache_write,
    "simcast::mla_attention": mla.mla_attention,
    # quantised weights (simcast.trace.quant)
    "simcast::quant_linear": quant_linear.quant_linear,
}

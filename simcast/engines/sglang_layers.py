"""SGLang's dense MLP layers and LM head with DP attention (``--moe-dense-tp-size``, ``--enable-dp-lm-head``):
the rule :class:`simcast.engines.sglang.Sglang` applies (:meth:`simcast.engines.base.Engine.layer_groups`).

Read in sgl-project/sglang:

- ``python/sglang/srt/layers/communicator.py``@fd3907ee ``LayerScatterModes._compute_mlp_mode``: a dense
  (non-sparse) layer's MLP runs ``SCATTERED`` when ``enable_moe_dense_fully_dp()`` (``moe_dense_tp_size == 1``),
  else ``FULL``. ``FULL`` with DP attention: ``_communicate_with_all_reduce_and_layer_norm`` sums the attention
  output into the whole TP group's gathered buffer (``dp_gather_partial``: every DP rank's tokens, the attention
  TP sum folded in), the MLP runs on it TP-sharded over every GPU of the stage
  (``models/deepseek_v2.py``: ``DeepseekV2MLP`` with the TP group's rank and size unless
  ``enable_moe_dense_fully_dp()``, then ``tp_size=1``), its output all-reduced over that group, and
  ``dp_scatter`` takes this rank's rows back. ``SCATTERED``: the attention output is reduce-scattered over the
  attention-TP group (``attn_tp_reduce_scatter``), the MLP runs unsharded on this rank's 1/attn_tp of the tokens
  with no all-reduce, and the next layer all-gathers them (``attn_tp_all_gather``). Only the first
  ``first_k_dense_replace`` layers of DeepSeek are dense; the shared experts live in the MoE layers and follow
  the MoE path (``moe_dense_tp_size`` does not touch them).
- ``server_args.py``: ``assert self.moe_dense_tp_size in {1, None}``.
- ``python/sglang/srt/layers/logits_processor.py``@009db01a ``LogitsProcessor``: without
  ``enable_dp_lm_head`` and with DP attention the last tokens of every DP rank are gathered
  (``dp_gather_replicate``), multiplied by the vocab shard of the whole TP group (``ParallelLMHead``,
  ``use_attn_tp_group=False``), the logits all-gathered over the TP group (``tensor_model_parallel_all_gather``)
  and this rank's rows scattered back (``dp_scatter``); with it, the LM head is vocab-parallel over the
  attention-TP group on this rank's own tokens (``attn_tp_all_gather`` of the logits when attention TP > 1).
"""

from __future__ import annotations

from dataclasses import replace

from simcast.core.errors import require
from simcast.core.moe_layout import spans_replicas
from simcast.core.specs import ParallelSpec


def sglang_layer_groups(par: ParallelSpec, moe_dense_tp_size: int | None, dp_lm_head: bool) -> ParallelSpec:
    """``par`` with SGLang's dense-MLP and LM-head groups (module docstring); a mode already resolved (a
    deployment rebuilt from its spec) is kept when the flag is not given again."""
    require(
        moe_dense_tp_size in (None, 1),
        "--moe-dense-tp-size",
        moe_dense_tp_size,
        "SGLang supports 1 only (server_args.py: assert moe_dense_tp_size in {1, None})",
    )
    dp_attention = spans_replicas(par)
    dense = par.dense_ffn or ("gathered" if dp_attention else "")
    dense = "scattered" if moe_dense_tp_size == 1 else dense
    head = "attention" if dp_lm_head else (par.lm_head or ("gathered" if dp_attention else ""))
    return par if (dense, head) == (par.dense_ffn, par.lm_head) else replace(par, dense_ffn=dense, lm_head=head)

"""The MoE assumption records in words: routing skew, the layout's replicas and expert placement, the all-to-all
the engine runs and what it overlaps (:mod:`simcast.render.assumption_text` dispatches to them)."""

from __future__ import annotations

from simcast.core import assumption as A


def _moe_comm(f: A.MoeComm) -> str:
    out = "MoE all-to-all: "
    if f.deepep:
        route = (
            f"node-limited routing (n_group {f.expert_groups}, topk_group {f.topk_groups}; assumed: each picked "
            "group holds one of the top-k)"
            if f.grouped_routing
            else "uniform routing"
        )
        out += (
            f"DeepEP, {f.prefill_mode} mode for prefill, {f.decode_mode} for decode; normal mode sends a token once "
            f"per destination node over RDMA ({f.nodes_per_token:.2f} of {f.nodes} nodes per token, {route}) and "
            "forwards it over NVLink; FP8 dispatch for FP8 experts, BF16 combine; DeepEP's latency and achieved "
            "link fractions fitted on its V1 tables (deepseek-ai/DeepEP docs/legacy.md@dd758caf, H800), scaled "
            "to the profile's link rates (simcast/cost/comm/deepep.py); inside one node the engine's measured "
            "DeepEP fit where the profile has one"
        )
    else:
        out += "the engine's default, costed on the link table"
    if f.two_batch_overlap:
        out += (
            "; two-batch overlap: two micro-batches, each one's dispatch/combine under the other's compute, "
            "DeepEP normal kernels' SMs taken from the GEMMs (simcast/cost/overlap.py)"
        )
    if f.single_batch_overlap:
        out += "; single-batch overlap: shared experts beside the combine"
    return out + f" ({f.source})"


def _moe(f: A.MoeRouting) -> str:
    return (
        f"MoE: {f.num_experts} experts top-{f.top_k}, EP={f.ep} MoE-TP={f.moe_tp} "
        f"MoE-DP={f.moe_dp} (stage-local groups); busiest expert rank under uniform top-k routing "
        f"(mean + sigma*sqrt(2 ln ep)) x expert imbalance {f.expert_imbalance:g}"
        + (
            f" (default: published routing skew, Gini {f.routing_gini} -> max/mean 1 + 3 Gini; arXiv:2605.20982)"
            if f.default_imbalance
            else ""
        )
        + f"; {f.comm_mode or 'no'} MoE communication"
    )


def _moe_layout(f: A.MoeLayout) -> str:
    parts = []
    if f.replicas_share_nothing:
        parts.append(f"the {f.dp} replicas hold their own experts: no cross-replica MoE traffic, a replica's step")
    if f.active_dp_ranks:
        parts.append(
            f"{f.active_dp_ranks} of {f.dp} attention-DP ranks carry tokens (one prompt on an idle engine: one rank "
            "prefills it; the MoE layer sees its tokens only)"
        )
    if f.redundant_experts or f.eplb:
        parts.append(
            f"EP={f.ep}: {f.expert_slots} expert slots per rank ({f.redundant_experts} redundant)"
            + (
                f"; EPLB placement (deepseek-ai/EPLB replicate + balanced packing on the default load profile): "
                f"busiest rank {f.rank_imbalance:.3f} x the mean"
                if f.eplb
                else "; static placement: the expert imbalance as without redundancy"
            )
        )
    return "MoE layout: " + "; ".join(parts)


def _layer_groups(f: A.LayerGroups) -> str:
    """The dense MLP layers and the LM head outside the attention-TP group (SGLang with DP attention)."""
    parts = []
    if f.dense_ffn == "gathered":
        parts.append(
            f"dense MLP layers on all {f.dp_ranks} DP ranks' tokens gathered, sharded over the {f.group_ranks} GPUs "
            "of the stage, all-reduced, rows scattered back (SGLang FULL mode; --moe-dense-tp-size 1 runs them "
            "unsharded per rank)"
        )
    elif f.dense_ffn == "scattered":
        parts.append(
            f"dense MLP layers unsharded (--moe-dense-tp-size 1) on 1/{f.attention_tp} of the rank's tokens, the "
            "attention output reduce-scattered and the rows all-gathered back over the attention-TP group"
            if f.attention_tp > 1
            else "dense MLP layers unsharded (--moe-dense-tp-size 1) on each rank's own tokens, no collective"
        )
    if f.lm_head == "gathered":
        parts.append(
            f"LM head vocab-parallel over the {f.group_ranks} GPUs of the stage on every DP rank's last tokens "
            "gathered, logits all-gathered, rows scattered back (SGLang without --enable-dp-lm-head)"
        )
    elif f.lm_head == "attention":
        parts.append(
            f"LM head vocab-parallel over each DP rank's attention-TP group of {f.attention_tp} (--enable-dp-lm-head)"
        )
    return (
        "; ".join(parts)
        + "; gathered rows count every DP rank at this batch, each gather costed as an all-gather of its output, "
        "weights per rank as at attention TP (memory not re-sharded)"
        " "
        "(sgl-project/sglang layers/communicator.py, logits_processor.py)"
    )

"""The MoE layout flags ``simulate`` and ``bench-serve`` share, declared once: expert parallelism and
attention data parallelism as the engines launch them, and the :class:`ParallelSpec` they make.

simcast's ``--tp`` is the tensor-parallel size of *one attention group* and ``--dp`` the number of groups,
so the world is ``tp · pp · dp``. The engines' spellings map onto them as follows:

- SGLang ``--tp-size T --dp-size D --enable-dp-attention [--ep-size E]``: ``--tp T/D --dp D
  --enable-dp-attention [--ep E]`` (SGLang's ``--tp-size`` counts every GPU; attention TP is ``T/D``:
  sgl-project/sglang python/sglang/srt/layers/dp_attention.py ``compute_dp_attention_world_info``).
- vLLM ``--tensor-parallel-size T --data-parallel-size D --enable-expert-parallel``: ``--tp T --dp D
  --enable-expert-parallel`` (the MoE layers of the ``T·D`` ranks form one EP group; vLLM docs,
  "Data Parallel Deployment" / "Expert Parallel Deployment"); on an MoE model vLLM's DP is attention-DP.
- TensorRT-LLM ``tp_size T, enable_attention_dp: true, moe_expert_parallel_size E``: ``--tp 1 --dp T
  --enable-dp-attention --ep E`` (attention DP runs TP 1 per rank).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.api.options import Flag, opt
from simcast.core.errors import require
from simcast.core.model_spec import ModelSpec
from simcast.core.specs import ParallelSpec


@dataclass(frozen=True, kw_only=True)
class WideEPOptions:
    """Redundant experts and EPLB (``simcast.core.moe_placement``): on simulate, bench-serve and optimize."""

    ep_num_redundant_experts: int = opt(
        0,
        "MoE: redundant expert replicas over the EP group (slots per rank = ceil((E + R) / ep))",
        flag=Flag(
            names=("--ep-num-redundant-experts",),
            help="MoE: redundant expert replicas spread over the EP ranks, ceil((experts + R) / ep) slots each, so "
            "ep need not divide the experts (SGLang --ep-num-redundant-experts; vLLM --eplb-config "
            "num_redundant_experts) [default 0]",
            value_type="experts",
        ),
    )
    enable_eplb: bool = opt(
        False,
        "MoE: experts replicated and placed by load (EPLB)",
        flag=Flag(
            names=("--enable-eplb",),
            help="MoE: experts replicated and placed by load, as deepseek-ai/EPLB does (SGLang/vLLM --enable-eplb): "
            "the busiest EP rank's load follows that placement (simcast.core.moe_placement)",
            action="store_true",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class MoELayoutOptions(WideEPOptions):
    """Expert parallelism and attention data parallelism (module docstring: the engines' spellings)."""

    ep: int = opt(
        1,
        "MoE: expert-parallel size",
        flag=Flag(
            names=("--ep", "--ep-size"),
            help="MoE: expert-parallel size (the experts of a stage split over ep ranks; SGLang --ep-size, "
            "TensorRT-LLM moe_expert_parallel_size) [default 1]",
            value_type="devices",
        ),
    )
    dp_attention: bool = opt(
        False,
        "MoE: the dp replicas are attention-DP groups feeding one MoE layer",
        flag=Flag(
            names=("--dp-attention", "--enable-dp-attention"),
            help="MoE: the dp groups are attention data-parallel ranks feeding one MoE layer (SGLang "
            "--enable-dp-attention with --tp = its --tp-size / --dp-size; TensorRT-LLM enable_attention_dp); "
            "needs dp > 1",
            action="store_true",
        ),
    )
    enable_expert_parallel: bool = opt(
        False,
        "MoE: vLLM's --enable-expert-parallel: ep = tp·dp (with dp > 1: attention-DP)",
        flag=Flag(
            names=("--enable-expert-parallel",),
            help="MoE: vLLM's expert parallelism: the MoE layers of all tp x dp ranks form one EP group "
            "(ep = tp*dp; with dp > 1 the dp ranks are attention-DP, as vLLM runs DP on an MoE model)",
            action="store_true",
        ),
    )


def moe_parallel(
    o: MoELayoutOptions, model: ModelSpec, *, tp: int, pp: int, dp: int, moe_dp: int | None = None
) -> ParallelSpec:
    """The layout of ``tp · pp · dp`` ranks with ``o``'s MoE flags. ``moe_dp`` None: independent replicas
    (``moe_dp = dp``, each with its own experts) unless attention-DP is asked for, then one MoE group over
    the replicas (``moe_dp = 1``). ``--enable-expert-parallel`` sets ``ep = tp · dp``."""
    attn_dp = o.dp_attention or (o.enable_expert_parallel and dp > 1)
    ep = tp * dp if o.enable_expert_parallel else o.ep
    require(
        model.moe is not None or (ep == 1 and not attn_dp and not o.enable_expert_parallel),
        "--ep/--enable-dp-attention",
        f"ep {ep}",
        f"{model.name} has no experts",
    )
    require(not attn_dp or dp > 1, "--enable-dp-attention", dp, "needs --dp > 1 (attention data-parallel ranks)")
    require(
        not (o.enable_expert_parallel and o.ep not in (1, ep)),
        "--ep",
        o.ep,
        f"--enable-expert-parallel sets ep = tp*dp = {ep}",
    )
    mdp = moe_dp if moe_dp is not None else (1 if attn_dp or model.moe is None else dp)
    stage = tp * dp
    require(
        stage % (ep * mdp) == 0,
        "--ep",
        ep,
        f"must divide the {stage // mdp} ranks of one MoE group (tp*dp/moe_dp; "
        + ("attention-DP: tp*dp" if mdp == 1 else "independent replicas: each replica's tp")
        + ")",
    )
    return ParallelSpec(
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        moe_dp=mdp,
        dp_attention=attn_dp and mdp < dp,
        redundant_experts=o.ep_num_redundant_experts,
        eplb=o.enable_eplb,
    )

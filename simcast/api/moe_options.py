"""The MoE layout flags ``simulate`` and ``bench-serve`` share, declared once: expert parallelism and
attention data parallelism as the engines launch them, and the :class:`ParallelSpec` they make.

simcast's ``--tp`` is the tensor-parallel size of *one attention group* and ``--dp`` the number of groups,
so the world is ``tp · pp · dp``. Each engine's own spelling is accepted as it is launched and read into
simcast's by :mod:`simcast.api.layout_spelling` (sources there):

- SGLang ``--tp-size T --dp-size D --enable-dp-attention [--ep-size E]`` (``--tp-size`` counts every GPU of
  a stage; attention TP is ``T/D``): simcast ``--tp T/D --dp D --dp-attention [--ep E]``.
- TensorRT-LLM ``--tp-size T --enable-attention-dp [--ep-size E]`` (``tensor_parallel_size``,
  ``enable_attention_dp: true``, ``moe_expert_parallel_size``): simcast ``--tp 1 --dp T --dp-attention``.
- vLLM ``--tensor-parallel-size T --data-parallel-size D --enable-expert-parallel``: simcast's meaning
  already (``--tp T --dp D --enable-expert-parallel``: the MoE layers of the ``T·D`` ranks form one EP group;
  vLLM docs, "Data Parallel Deployment" / "Expert Parallel Deployment"); on an MoE model vLLM's DP is
  attention-DP.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.api.layout_spelling import apply_engine_spelling
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
class EngineSpellingOptions:
    """The layout in the engines' own spelling (:mod:`simcast.api.layout_spelling`: how each is read)."""

    tp_size: int | None = opt(
        None,
        "the engine's TP size: every GPU of a stage (SGLang --tp-size, TensorRT-LLM tensor_parallel_size)",
        flag=Flag(
            names=("--tp-size", "--tp_size"),
            help="the engine's TP size as SGLang (--tp-size) and TensorRT-LLM (tensor_parallel_size, trtllm-serve "
            "--tp_size) count it: every GPU of one pipeline stage; with --enable-dp-attention --dp-size D attention "
            "TP is tp-size/D (simcast's --tp), with --enable-attention-dp it is 1. Give it or simcast's --tp/--dp",
            value_type="devices",
        ),
    )
    dp_size: int | None = opt(
        None,
        "SGLang's --dp-size (with --tp-size): attention-DP ranks, or replicas without DP attention",
        flag=Flag(
            names=("--dp-size",),
            help="SGLang's --dp-size, with --tp-size: with --enable-dp-attention the attention data-parallel ranks "
            "among the --tp-size GPUs of a stage; without it, replicas of --tp-size GPUs each",
            value_type="devices",
        ),
    )
    enable_attention_dp: bool = opt(
        False,
        "TensorRT-LLM's enable_attention_dp: attention DP = tp_size, attention TP 1",
        flag=Flag(
            names=("--enable-attention-dp",),
            help="TensorRT-LLM's enable_attention_dp (with --tp-size, its tensor_parallel_size): every GPU of a "
            "stage runs attention alone, attention DP = --tp-size, attention TP 1",
            action="store_true",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class MoELayoutOptions(EngineSpellingOptions, WideEPOptions):
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
            help="MoE: the dp groups are attention data-parallel ranks feeding one MoE layer; with simcast's --tp "
            "(attention TP per rank) it needs --dp > 1; with SGLang's --tp-size/--dp-size it is SGLang's "
            "--enable-dp-attention (attention TP = tp-size/dp-size)",
            action="store_true",
        ),
    )
    moe_dense_tp_size: int | None = opt(
        None,
        "SGLang's --moe-dense-tp-size (1 only): the dense MLP layers unsharded per rank",
        flag=Flag(
            names=("--moe-dense-tp-size",),
            help="SGLang's --moe-dense-tp-size (1, as SGLang supports): the dense MLP layers (DeepSeek's first "
            "first_k_dense_replace layers; not the shared experts) run unsharded on each rank's own tokens instead "
            "of sharded over every GPU of the stage on all DP ranks' gathered tokens (--engine sglang)",
            value_type="devices",
        ),
    )
    enable_dp_lm_head: bool = opt(
        False,
        "SGLang's --enable-dp-lm-head: the LM head in each DP rank's attention-TP group",
        flag=Flag(
            names=("--enable-dp-lm-head",),
            help="SGLang's --enable-dp-lm-head: the LM head vocab-parallel over each DP rank's attention-TP group on "
            "its own tokens, instead of over every GPU of the stage on all DP ranks' gathered tokens (--engine sglang)",
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

    def __post_init__(self) -> None:
        """The engine-spelled layout read into simcast's fields (:func:`apply_engine_spelling`), then the
        next options class's own checks."""
        apply_engine_spelling(self)
        nxt = getattr(super(), "__post_init__", None)
        if nxt is not None:
            nxt()


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
    require(
        not attn_dp or dp > 1,
        "--enable-dp-attention",
        dp,
        f"needs --dp > 1 (attention data-parallel ranks; simcast's --tp {tp} is attention TP per rank): the engine's "
        f"count of every GPU of a stage is --tp-size {tp} with --dp-size D (SGLang) or --enable-attention-dp "
        "(TensorRT-LLM)",
    )
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

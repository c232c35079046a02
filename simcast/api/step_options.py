"""The keywords of ``simulate_step`` (``simcast simulate``'s flags), each declared once: its default, its
one-line doc and its CLI flag (:class:`simcast.api.options.Flag`: names, help, bounded type)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from simcast.api.common import EXPERT_IMBALANCE_FLAG, TargetOptions, normalise_engine
from simcast.api.layout_spelling import apply_engine_spelling
from simcast.api.moe_comm_options import MoECommOptions
from simcast.api.moe_options import MoELayoutOptions
from simcast.api.options import Flag, opt
from simcast.api.speculative import SpeculativeOptions
from simcast.core.chunking import SGLANG_SMOOTH_FACTOR
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE
from simcast.engines import ENGINE_CHOICES


@dataclass(frozen=True, kw_only=True)
class StepOptions(MoECommOptions, MoELayoutOptions, SpeculativeOptions, TargetOptions):
    """The keywords of :func:`simulate_step` (``simcast simulate``'s flags): the layout, the batch, the
    step's phase and how its prompt is split."""

    tp: int = opt(
        1,
        "tensor-parallel size of one attention group (DP rank)",
        flag=Flag(
            names=("--tp", "--tensor-parallel-size"),
            help="tensor-parallel size of one attention group: per DP rank, as vLLM's --tensor-parallel-size "
            "(SGLang's/TensorRT-LLM's count: --tp-size)",
            value_type="devices",
        ),
    )
    pp: int = opt(
        1,
        "pipeline-parallel size (stages)",
        flag=Flag(
            names=("--pp", "--pp-size", "--pipeline-parallel-size", "--pp_size"),
            help="pipeline-parallel size (stages)",
            value_type="devices",
        ),
    )
    dp: int | None = opt(None, "data-parallel replicas (None: num_devices // (tp*pp))")
    num_devices: int | None = opt(
        None,
        "world size (None: tp*pp*dp)",
        flag=Flag(
            names=("--num-devices",),
            help="world size; default tp*pp (dp = num_devices // (tp*pp)) [<= 65536]",
            value_type="devices",
        ),
    )
    moe_dp: int = opt(
        1,
        "MoE: expert data-parallel size; moe_tp = num_devices / (pp*ep*moe_dp)",
        flag=Flag(
            names=("--moe-dp",),
            help="MoE: expert data-parallel size; moe_tp = num_devices / (pp*ep*moe_dp) [default 1]",
            value_type="devices",
        ),
    )
    expert_imbalance: float = opt(
        DEFAULT_EXPERT_IMBALANCE,
        "MoE: busiest expert rank's load over the uniform-routing expectation",
        flag=EXPERT_IMBALANCE_FLAG,
    )
    batch_size: int = opt(
        1,
        "requests in the step (--batch)",
        flag=Flag(names=("--batch",), help="requests in the step [<= 10^6]", value_type="requests"),
    )
    input_length: int = opt(
        2048,
        "prompt tokens per request",
        flag=Flag(
            names=("--input-length",),
            help="prompt tokens per request (prefill) [default 2048, <= 10^7]",
            value_type="tokens",
        ),
    )
    phase: Literal["prefill", "decode"] = opt(
        "prefill",
        "prefill: the prompts; decode: one token each",
        flag=Flag(names=("--phase",), help="which step to simulate", choices=("prefill", "decode")),
    )
    context_length: int | None = opt(
        None,
        "decode: cached tokens per request (None: input_length)",
        flag=Flag(
            names=("--context-length",),
            help="decode: tokens already in the KV cache per request [default: input length, <= 10^7]",
            value_type="tokens",
        ),
    )
    microbatches: int | None = opt(
        None,
        "microbatches the batch is split into (None: pp)",
        flag=Flag(
            names=("--microbatches",),
            help="microbatches the step is split into [default: pp, <= 4096]",
            value_type="microbatches",
        ),
    )
    chunked_prefill_size: int | None = opt(
        None,
        "tokens per chunk of one prompt's chunked pipeline prefill",
        flag=Flag(
            names=("--chunked-prefill-size", "--max-num-batched-tokens"),
            help="prefill of one prompt (--batch 1): chunks of this many tokens flow through the PP stages as "
            "microbatches, each attending to the chunks before it (SGLang --chunked-prefill-size, vLLM "
            "--max-num-batched-tokens) [default with --engine sglang/vllm: the engine's own; none: --microbatches]",
            value_type="tokens",
        ),
    )
    enable_dynamic_chunking: bool = opt(
        False,
        "SGLang's dynamic chunking of one prompt's pipeline prefill",
        flag=Flag(
            names=("--enable-dynamic-chunking",),
            help="SGLang's dynamic chunking: after the first chunk (--chunked-prefill-size), each chunk is sized "
            "to take as long as the first, from a quadratic fit of stage 0's prefill time",
            action="store_true",
        ),
    )
    dynamic_chunking_smooth_factor: float = opt(
        SGLANG_SMOOTH_FACTOR,
        "SGLang's smooth factor, in [0, 1]",
        flag=Flag(
            names=("--dynamic-chunking-smooth-factor",),
            help="how far a dynamic chunk moves from --chunked-prefill-size toward the equal-time size "
            f"(SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR) [default {SGLANG_SMOOTH_FACTOR}]",
            value_type="smooth_factor",
        ),
    )
    engine: str = opt(
        "none",
        "cost kernels with this engine's fits (none: the generic roofline)",
        flag=Flag(
            names=("--engine",),
            help="cost GEMMs, attention and TP all-reduce with the profile's fitted kernels of this serving "
            "engine (nearest engine's fit if it has none, labelled) [default none: generic roofline]",
            choices=ENGINE_CHOICES,
        ),
    )
    dtype: str | None = opt(
        None,
        "bf16, fp16 or fp8: every weight and activation (None: the config's)",
        flag=Flag(
            names=("--dtype",),
            help="element type of weights and activations [default: config]; fp8 here means every tensor in fp8 "
            "(a bound; engines run --quantization fp8: W8A8 GEMMs with 16-bit activations)",
            choices=("bf16", "fp16", "fp8"),
        ),
    )
    devices_per_node: int | None = opt(
        None,
        "devices per node (None: the profile's)",
        flag=Flag(
            names=("--devices-per-node",),
            help="override the profile's devices per node [<= 1024]",
            value_type="devices_per_node",
        ),
    )
    tp_sharded_send: bool = opt(
        False,
        "each TP rank sends 1/tp of the hidden states (vLLM)",
        flag=Flag(
            names=("--tp-sharded-send",),
            help="each TP rank sends 1/tp of the hidden states; the receiving stage all-gathers them over "
            "its TP group (vLLM); both costed",
            action="store_true",
        ),
    )
    residual_send: bool = opt(
        True,
        "stages send the residual with the hidden states",
        flag=Flag(
            names=("--no-residual-send",), help="send hidden states only, not the residual", action="store_false"
        ),
    )

    def __post_init__(self) -> None:
        normalise_engine(self)
        apply_engine_spelling(self)  # --tp-size/--dp-size/--enable-attention-dp: simcast's fields

"""CLI wiring for ``simcast simulate``: one forward step of one layout (edge module)."""

from __future__ import annotations

import argparse

from simcast.api.step import StepOptions, run_step, step_spec
from simcast.cli.args import (
    DEVICES,
    DEVICES_PER_NODE,
    MICROBATCHES,
    REQUESTS,
    TOKENS,
    add_expert_imbalance_arg,
    add_fabric_args,
    add_partition_arg,
    add_precision_args,
    float_in,
    target_kwargs,
)
from simcast.cli.outputs import add_output_args, emit, emit_json, run_metadata, write_outputs
from simcast.cli.speculative import add_speculative_args, speculative_kwargs
from simcast.core.chunking import SGLANG_SMOOTH_FACTOR
from simcast.core.specs import SimSpec
from simcast.engines import ENGINE_CHOICES


def add_simulate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="shipped model id (e.g. meta-llama/Llama-3.1-70B) or a config.json path"
    )
    p.add_argument("--device", required=True, help="shipped device profile (e.g. h100_sxm) or a YAML path")
    p.add_argument("--tp", type=DEVICES, default=1, help="tensor-parallel size")
    p.add_argument("--pp", type=DEVICES, default=1, help="pipeline-parallel size (stages)")
    p.add_argument(
        "--num-devices",
        type=DEVICES,
        default=None,
        help="world size; default tp*pp (dp = num_devices // (tp*pp)) [<= 65536]",
    )
    p.add_argument(
        "--ep",
        type=DEVICES,
        default=1,
        help="MoE: expert-parallel size (the experts of a stage split over ep ranks) [default 1]",
    )
    p.add_argument(
        "--moe-dp",
        type=DEVICES,
        default=1,
        help="MoE: expert data-parallel size; moe_tp = num_devices / (pp*ep*moe_dp) [default 1]",
    )
    add_expert_imbalance_arg(p)
    add_precision_args(p)
    p.add_argument(
        "--dp-attention",
        action="store_true",
        help="MoE: the dp replicas are attention-DP groups feeding one MoE layer (needs dp > 1)",
    )
    p.add_argument("--batch", type=REQUESTS, default=1, help="requests in the step [<= 10^6]")
    p.add_argument(
        "--input-length", type=TOKENS, default=2048, help="prompt tokens per request (prefill) [default 2048, <= 10^7]"
    )
    p.add_argument("--phase", choices=("prefill", "decode"), default="prefill", help="which step to simulate")
    p.add_argument(
        "--context-length",
        type=TOKENS,
        default=None,
        help="decode: tokens already in the KV cache per request [default: input length, <= 10^7]",
    )
    p.add_argument(
        "--microbatches",
        type=MICROBATCHES,
        default=None,
        help="microbatches the step is split into [default: pp, <= 4096]",
    )
    p.add_argument(
        "--chunked-prefill-size",
        "--max-num-batched-tokens",
        dest="chunked_prefill_size",
        type=TOKENS,
        default=None,
        help="prefill of one prompt (--batch 1): chunks of this many tokens flow through the PP stages as "
        "microbatches, each attending to the chunks before it (SGLang --chunked-prefill-size, vLLM "
        "--max-num-batched-tokens) [default with --engine sglang/vllm: the engine's own; none: --microbatches]",
    )
    p.add_argument(
        "--enable-dynamic-chunking",
        action="store_true",
        help="SGLang's dynamic chunking: after the first chunk (--chunked-prefill-size), each chunk is sized "
        "to take as long as the first, from a quadratic fit of stage 0's prefill time",
    )
    p.add_argument(
        "--dynamic-chunking-smooth-factor",
        type=float_in(0.0, 1.0, "SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR"),
        default=SGLANG_SMOOTH_FACTOR,
        help=f"how far a dynamic chunk moves from --chunked-prefill-size toward the equal-time size "
        f"(SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR) [default {SGLANG_SMOOTH_FACTOR}]",
    )
    add_partition_arg(p, "uniform | vllm | sglang | trtllm | balanced (minimise the slowest stage)")
    p.add_argument(
        "--devices-per-node",
        type=DEVICES_PER_NODE,
        default=None,
        help="override the profile's devices per node [<= 1024]",
    )
    add_fabric_args(p)
    p.add_argument(
        "--dtype",
        choices=("bf16", "fp16", "fp8"),
        default=None,
        help="element type of weights and activations [default: config]; fp8 here means every tensor in fp8 "
        "(a bound; engines run --quantization fp8: W8A8 GEMMs with 16-bit activations)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINE_CHOICES,
        default="none",
        help="cost GEMMs, attention and TP all-reduce with the profile's fitted kernels of this serving "
        "engine (nearest engine's fit if it has none, labelled) [default none: generic roofline]",
    )
    p.add_argument(
        "--tp-sharded-send",
        action="store_true",
        help="each TP rank sends 1/tp of the hidden states; the receiving stage all-gathers them over "
        "its TP group (vLLM); both costed",
    )
    p.add_argument("--no-residual-send", action="store_true", help="send hidden states only, not the residual")
    p.add_argument("--no-cache", action="store_true", help="bypass the on-disk trace cache")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_speculative_args(p)
    add_output_args(p)


def step_options(a: argparse.Namespace) -> StepOptions:
    """The :func:`simcast.api.step.simulate_step` keywords of parsed ``simcast simulate`` flags."""
    return StepOptions(
        tp=a.tp,
        pp=a.pp,
        num_devices=a.num_devices,
        ep=a.ep,
        moe_dp=a.moe_dp,
        dp_attention=a.dp_attention,
        expert_imbalance=a.expert_imbalance,
        batch_size=a.batch,
        input_length=a.input_length,
        phase=a.phase,
        context_length=a.context_length,
        microbatches=a.microbatches,
        chunked_prefill_size=a.chunked_prefill_size,
        enable_dynamic_chunking=a.enable_dynamic_chunking,
        dynamic_chunking_smooth_factor=a.dynamic_chunking_smooth_factor,
        engine=a.engine,
        dtype=a.dtype,
        devices_per_node=a.devices_per_node,
        tp_sharded_send=a.tp_sharded_send,
        residual_send=not a.no_residual_send,
        **target_kwargs(a),
        **speculative_kwargs(a),
    )


def build_spec(a: argparse.Namespace) -> SimSpec:
    """The checked :class:`SimSpec` of parsed ``simcast simulate`` flags."""
    return step_spec(step_options(a))


def cmd_simulate(a: argparse.Namespace) -> int:
    from simcast.render.tables import format_report

    report = run_step(step_options(a))
    if a.json:
        emit_json({**report.to_dict(), "run": run_metadata(device=a.device, engine=a.engine)})
    else:
        emit(format_report(report))
    write_outputs(a, report)
    return 0

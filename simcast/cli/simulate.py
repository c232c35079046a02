"""CLI wiring for ``simcast simulate``: one forward step of one layout (edge module)."""

from __future__ import annotations

import argparse

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
    fabric_choice,
    float_in,
    resolve_partition_arg,
)
from simcast.cli.outputs import add_output_args, emit, emit_json, run_metadata, write_outputs
from simcast.cli.speculative import add_speculative_args, speculative_from_args
from simcast.core.chunking import SGLANG_SMOOTH_FACTOR
from simcast.core.engines import kernel_engine
from simcast.core.errors import require
from simcast.inputs.limits import MAX_DEVICES, MAX_MICROBATCHES, MAX_STAGE_MICROBATCHES
from simcast.serving.engines import ENGINE_CHOICES


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


def build_spec(a: argparse.Namespace):
    from simcast.core.fabrics import with_fabric
    from simcast.core.specs import Batch, ParallelSpec, SimSpec
    from simcast.inputs.loaders import load_device, load_model

    model = load_model(a.model, dtype=a.dtype, quantization=a.quantization)
    device = with_fabric(load_device(a.device, a.devices_per_node), fabric_choice(a))
    world = a.num_devices or a.tp * a.pp
    require(
        a.tp * a.pp <= min(world, MAX_DEVICES),
        "--tp*--pp",
        a.tp * a.pp,
        f"must be <= --num-devices={world}" if a.num_devices else f"must be <= {MAX_DEVICES} devices",
    )
    require(world % (a.tp * a.pp) == 0, "--num-devices", world, f"must be a multiple of tp*pp={a.tp * a.pp}")
    require(a.pp <= model.num_layers, "--pp", a.pp, f"must be <= the model's {model.num_layers} layers")
    m = a.microbatches or a.pp
    require(
        a.pp * m <= MAX_STAGE_MICROBATCHES,
        "--microbatches",
        m,
        f"must be <= {MAX_STAGE_MICROBATCHES // a.pp} with --pp {a.pp} (at most {MAX_STAGE_MICROBATCHES} "
        "stage x microbatch pairs)",
    )
    spec_dec = speculative_from_args(a, model)
    require(
        spec_dec is None or a.phase == "decode",
        "--phase",
        a.phase,
        "speculative decoding changes the decode step: use --phase decode (the verify step)",
    )
    if a.phase == "prefill":
        batch = Batch.prefill(a.batch, a.input_length)
    elif spec_dec is not None:  # the verify step: k + 1 query tokens per request against its context
        ctx = a.context_length or a.input_length
        batch = Batch(query_lens=(spec_dec.verify_tokens,), context_lens=(ctx,), counts=(a.batch,))
    else:
        batch = Batch.decode(a.batch, a.context_length or a.input_length)
    require(
        model.moe is not None or (a.ep == 1 and a.moe_dp == 1),
        "--ep/--moe-dp",
        f"{a.ep}/{a.moe_dp}",
        f"{model.name} has no experts: both must be 1",
    )
    par = ParallelSpec(
        tp=a.tp,
        pp=a.pp,
        dp=world // (a.tp * a.pp),
        world_size=world,
        ep=a.ep,
        moe_dp=a.moe_dp,
        dp_attention=a.dp_attention,
    )
    spec = SimSpec(
        model=model,
        device=device,
        parallel=par,
        batch=batch,
        num_microbatches=a.microbatches or a.pp,
        partition=resolve_partition_arg(a.partition, kernel_engine(a.engine)),
        send_residual=not a.no_residual_send,
        tp_sharded_send=a.tp_sharded_send,
        engine=kernel_engine(a.engine),
        expert_imbalance=a.expert_imbalance,
        kv_cache_dtype=a.kv_cache_dtype,
        decode_query_len=spec_dec.verify_tokens if spec_dec else 1,
    )
    return _chunked(a, spec)


def _chunked(a: argparse.Namespace, spec):
    """``spec`` with its prompt's chunked pipeline prefill when asked for, or when the engine chunks a
    prompt by default (SGLang, vLLM: chunks of the engine's token budget; TRT-LLM: the whole prompt)."""
    from simcast.core.chunking import RULES
    from simcast.serving.engines import engine_policy
    from simcast.sim.chunked import chunked_prefill_spec, plan_chunks

    asked = a.chunked_prefill_size is not None or a.enable_dynamic_chunking
    one_prompt = a.phase == "prefill" and a.batch == 1
    require(
        not asked or one_prompt,
        "--chunked-prefill-size",
        f"--batch {a.batch} --phase {a.phase}",
        "chunked pipeline prefill needs one prompt (--batch 1 --phase prefill)",
    )
    require(
        not asked or a.microbatches is None,
        "--microbatches",
        a.microbatches,
        "choose --microbatches (equal split) or --chunked-prefill-size/--enable-dynamic-chunking, not both",
    )
    rule = RULES.get(a.engine)
    if not one_prompt or a.microbatches is not None or (not asked and rule is None):
        return spec  # today's split into --microbatches (default pp)
    size, note = a.chunked_prefill_size, "--chunked-prefill-size"
    if size is None:
        require(
            rule is not None, "--enable-dynamic-chunking", a.engine, "needs --chunked-prefill-size without --engine"
        )
        assert rule is not None
        if rule.chunked_by_default or a.enable_dynamic_chunking:
            pol = engine_policy(a.engine, spec.device, tp=spec.parallel.tp, pp=spec.parallel.pp)
            size, note = pol.max_num_batched_tokens, f"{a.engine} default chunk {pol.max_num_batched_tokens}"
        else:
            size, note = a.input_length, f"{a.engine}: chunked prefill off by default, the prompt in one piece"
    most = min(MAX_MICROBATCHES, MAX_STAGE_MICROBATCHES // spec.parallel.pp)

    def check(n: int) -> None:
        require(
            n <= most,
            "--chunked-prefill-size",
            size,
            f"gives {n} chunks of the {a.input_length}-token prompt; at most {most} with --pp {spec.parallel.pp} "
            "(raise the chunk size)",
        )

    check(-(-a.input_length // size))
    chunks = plan_chunks(
        spec,
        a.input_length,
        size,
        dynamic=a.enable_dynamic_chunking,
        smooth_factor=a.dynamic_chunking_smooth_factor,
        use_disk_cache=not a.no_cache,
    )
    check(len(chunks))
    if a.enable_dynamic_chunking:
        note = (
            f"SGLang dynamic chunking from {size} (smooth factor {a.dynamic_chunking_smooth_factor:g}; quadratic "
            "fit of stage 0's time over 127 fresh prefills up to 1.25x the first chunk)"
        )
    return chunked_prefill_spec(spec, chunks, engine=a.engine if rule is not None else None, note=note)


def _speculative(a: argparse.Namespace, report):
    """The report of a verify step with the draft's time and the tokens per step in its assumptions, and
    the JSON fields they give (speculative decoding), or the report unchanged."""
    from dataclasses import replace

    spec_dec = speculative_from_args(a, report.spec.model)
    if spec_dec is None:
        return report, {}
    from simcast.serving.draft import FC_NOTE, draft_coster
    from simcast.serving.engines import engine_policy
    from simcast.serving.step import StepCoster

    s = report.spec
    target = StepCoster(
        model=s.model,
        device=s.device,
        parallel=s.parallel,
        partition=s.partition,
        policy=engine_policy(a.engine, s.device, tp=s.parallel.tp, pp=s.parallel.pp),
        expert_imbalance=s.expert_imbalance,
        kv_cache_dtype=s.kv_cache_dtype,
        engine=s.engine,
        use_disk_cache=not a.no_cache,
    )
    draft_s = draft_coster(target, spec_dec)(a.batch, a.context_length or a.input_length)
    step_s = report.latency_s + draft_s
    tau = spec_dec.tokens_per_step
    line = (
        f"speculative step: the verify step above ({spec_dec.verify_tokens} tokens per request) "
        f"{report.latency_s * 1e3:.3f} ms + the draft's {spec_dec.k} pass(es) on the last stage {draft_s * 1e3:.3f} ms "
        f"= {step_s * 1e3:.3f} ms per step, {step_s / tau * 1e3:.3f} ms per emitted token ({tau:.3f} tokens per "
        "request per step, the expected value); not in the stage times above: the draft"
        + ("" if spec_dec.method == "ngram" else f"; {FC_NOTE}")
    )
    fields = {
        "speculative": {
            "method": spec_dec.method,
            "num_speculative_tokens": spec_dec.k,
            "acceptance": list(spec_dec.acceptance),
            "acceptance_source": spec_dec.acceptance_source,
            "tokens_per_step": tau,
            "verify_step_ms": report.latency_s * 1e3,
            "draft_ms": draft_s * 1e3,
            "step_ms": step_s * 1e3,
            "ms_per_token": step_s / tau * 1e3,
        }
    }
    return replace(report, assumptions=report.assumptions + (spec_dec.describe(), line)), fields


def cmd_simulate(a: argparse.Namespace) -> int:
    from simcast.render.tables import format_report, report_to_dict
    from simcast.sim.partition import simulate_partitioned

    report = simulate_partitioned(build_spec(a), use_disk_cache=not a.no_cache)
    report, spec_fields = _speculative(a, report)
    if a.json:
        emit_json({**report_to_dict(report), **spec_fields, "run": run_metadata(device=a.device, engine=a.engine)})
    else:
        emit(format_report(report))
    write_outputs(a, report)
    return 0

"""``simulate_step``: one forward step of one TP x PP x DP (x EP) layout, as ``simcast simulate`` runs it.

``simcast simulate`` builds :class:`StepOptions` from its flags and calls :func:`step_spec` and
:func:`run_step`, which :func:`simulate_step` runs on its keywords, so the command and the call give the
same :class:`StepReport` (``tests/api/test_api.py`` holds them equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from simcast.api.common import (
    check_int,
    check_options,
    resolve_device,
    resolve_model,
)
from simcast.api.options import one_call
from simcast.api.speculative import speculative_spec, speculative_step
from simcast.api.step_options import StepOptions as StepOptions
from simcast.core.errors import require
from simcast.core.model_spec import ModelSpec
from simcast.core.specs import GIB, Batch, ParallelSpec, SimSpec
from simcast.inputs import limits
from simcast.sim.report import Report

if TYPE_CHECKING:
    import pandas as pd

    from simcast.calib.uncertainty.figures import FigureInterval


@dataclass(frozen=True, kw_only=True)
class StepReport(Report):
    """A :class:`~simcast.sim.report.Report` with its JSON form and its per-stage table; with speculative
    decoding the report is the verify step's and ``speculative`` holds the draft's time and the step's
    tokens (ms, as ``--json`` prints them)."""

    speculative: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """What ``simcast simulate --json`` prints, less its ``run`` block (seconds and bytes)."""
        from simcast.api.uncertainty import as_dict
        from simcast.render.tables import report_to_dict

        return {
            **report_to_dict(self),
            **({"speculative": dict(self.speculative)} if self.speculative else {}),
            "intervals_80": as_dict(self.intervals),
        }

    @property
    def intervals(self) -> dict[str, FigureInterval]:
        """80 % prediction interval of the step latency (ms) (:mod:`simcast.api.uncertainty`)."""
        from simcast.api.uncertainty import step_intervals

        sp = self.spec
        return step_intervals(
            latency_s=self.runtime.latency_s, phase=sp.batch.phase, engine=sp.engine, device=sp.device
        )

    def to_dataframe(self) -> pd.DataFrame:
        """One row per pipeline stage: layers, times per microbatch (ms), memory per device (GiB)."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "stage_id": s.stage_id,
                    "start_layer": s.start_layer,
                    "end_layer": s.end_layer,
                    "num_layers": s.num_layers,
                    "compute_ms": s.compute_s * 1e3,
                    "tp_comm_ms": s.tp_comm_s * 1e3,
                    "comm_ms": s.comm_s * 1e3,
                    "stage_ms": s.stage_s * 1e3,
                    "weights_gib": s.weight_bytes / GIB,
                    "kv_cache_gib": s.kv_cache_bytes / GIB,
                    "activation_gib": s.activation_bytes / GIB,
                    "tp_link": s.tp_link,
                }
                for s in self.stages
            ]
        )

    @classmethod
    def of(cls, r: Report, speculative: Mapping[str, Any] | None = None) -> StepReport:
        return cls(**{f.name: getattr(r, f.name) for f in fields(Report)}, speculative=speculative)


def step_spec(o: StepOptions) -> SimSpec:
    """The :class:`SimSpec` of one step, checked."""
    from simcast.deploy.deployment import Deployment
    from simcast.serving.speculative.scheme import scheme_of

    tp, pp, dp, num_devices, phase, microbatches = o.tp, o.pp, o.dp, o.num_devices, o.phase, o.microbatches
    _check_sizes(o)
    require(
        dp is None or num_devices is None or num_devices == tp * pp * dp,
        "--num-devices",
        num_devices,
        f"must equal tp*pp*dp = {tp * pp * (dp or 1)} when dp is given too",
    )
    m = resolve_model(o.model, dtype=o.dtype, quantization=o.quantization)
    dev = resolve_device(o.device, devices_per_node=o.devices_per_node, fabric=o.fabric)
    world = num_devices or tp * pp * (dp or 1)
    require(
        tp * pp <= min(world, limits.MAX_DEVICES),
        "--tp*--pp",
        tp * pp,
        f"must be <= --num-devices={world}" if num_devices else f"must be <= {limits.MAX_DEVICES} devices",
    )
    require(world % (tp * pp) == 0, "--num-devices", world, f"must be a multiple of tp*pp={tp * pp}")
    require(pp <= m.num_layers, "--pp", pp, f"must be <= the model's {m.num_layers} layers")
    mb = microbatches or pp
    require(
        pp * mb <= limits.MAX_STAGE_MICROBATCHES,
        "--microbatches",
        mb,
        f"must be <= {limits.MAX_STAGE_MICROBATCHES // pp} with --pp {pp} (at most "
        f"{limits.MAX_STAGE_MICROBATCHES} stage x microbatch pairs)",
    )
    spec_dec = speculative_spec(m, o)
    require(
        spec_dec is None or phase == "decode",
        "--phase",
        phase,
        "speculative decoding changes the decode step: use --phase decode (the verify step)",
    )
    batch = _step_batch(o, spec_dec)
    par = _step_parallel(o, m, world)
    deployment = Deployment.build(
        model=m,
        device=dev,
        parallel=par,
        partition=o.partition,
        engine=o.engine,
        kv_cache_dtype=o.kv_cache_dtype,
        expert_imbalance=o.expert_imbalance,
        moe_comm=o.moe_comm_flags(),
        moe_dense_tp_size=o.moe_dense_tp_size,
        enable_dp_lm_head=o.enable_dp_lm_head,
    )
    spec = deployment.sim_spec(
        batch,
        num_microbatches=mb,
        send_residual=o.residual_send,
        tp_sharded_send=o.tp_sharded_send,
        decode_query_len=scheme_of(spec_dec).verify_tokens,
    )
    return _chunked(spec, o)


def _step_batch(o: StepOptions, spec_dec: Any) -> Batch:
    """The step's requests: a prefill, a decode, or (speculative decoding) the verify step's k + 1 query
    tokens per request against its context."""

    context = o.context_length or o.input_length
    if o.phase == "prefill":
        return Batch.prefill(o.batch_size, o.input_length)
    if spec_dec is not None:
        return Batch(query_lens=(spec_dec.verify_tokens,), context_lens=(context,), counts=(o.batch_size,))
    return Batch.decode(o.batch_size, context)


def _step_parallel(o: StepOptions, m: ModelSpec, world: int) -> ParallelSpec:
    """The layout: TP x PP x DP over ``world`` devices, the MoE split (vLLM's ``--enable-expert-parallel``:
    one EP group over all tp x dp ranks, attention-DP when dp > 1), redundant experts and EPLB."""

    tp, pp, ep, moe_dp = o.tp, o.pp, o.ep, o.moe_dp
    require(
        m.moe is not None or (ep == 1 and moe_dp == 1),
        "--ep/--moe-dp",
        f"{ep}/{moe_dp}",
        f"{m.name} has no experts: both must be 1",
    )
    dp_n = world // (tp * pp)
    require(
        not (o.dp_attention and dp_n == 1),
        "--dp-attention",
        True,
        f"needs more than one attention-DP rank (simcast's --tp {tp} is attention TP per rank, one rank on {world} "
        f"devices): the engine's count of every GPU of a stage is --tp-size {tp} with --dp-size D "
        "--enable-dp-attention (SGLang) or --enable-attention-dp (TensorRT-LLM)",
    )
    if o.enable_expert_parallel:
        require(ep in (1, tp * dp_n), "--ep", ep, f"--enable-expert-parallel sets ep = tp*dp = {tp * dp_n}")
        ep = tp * dp_n
    return ParallelSpec(
        tp=tp,
        pp=pp,
        dp=dp_n,
        world_size=world,
        ep=ep,
        moe_dp=moe_dp,
        dp_attention=o.dp_attention or (o.enable_expert_parallel and dp_n > 1),
        redundant_experts=o.ep_num_redundant_experts,
        eplb=o.enable_eplb,
    )


def _check_sizes(o: StepOptions) -> None:
    """Each size and factor of ``o`` within its bounds (one :class:`SimcastInputError` naming its flag)."""
    check_options(o)  # every field with a bounded flag: the range its flag takes (simcast.inputs.bounds)
    check_int("--dp", o.dp, 1, limits.MAX_DEVICES)  # simulate has no --dp: the API's keyword only
    require(o.phase in ("prefill", "decode"), "--phase", o.phase, "allowed: prefill, decode")


def _chunked(spec: SimSpec, o: StepOptions) -> SimSpec:
    """``spec`` with its prompt's chunked pipeline prefill when asked for, or when the engine chunks a
    prompt by default (SGLang, vLLM: chunks of the engine's token budget; TRT-LLM: the whole prompt)."""
    from simcast.engines import PP_PREFILL_RULES as RULES
    from simcast.engines.policy import engine_policy
    from simcast.sim.chunked import chunked_prefill_spec, plan_chunks

    engine, input_length, dynamic = o.engine, o.input_length, o.enable_dynamic_chunking
    asked = o.chunked_prefill_size is not None or dynamic
    one_prompt = o.phase == "prefill" and o.batch_size == 1
    require(
        not asked or one_prompt,
        "--chunked-prefill-size",
        f"--batch {o.batch_size} --phase {o.phase}",
        "chunked pipeline prefill needs one prompt (--batch 1 --phase prefill)",
    )
    require(
        not asked or o.microbatches is None,
        "--microbatches",
        o.microbatches,
        "choose --microbatches (equal split) or --chunked-prefill-size/--enable-dynamic-chunking, not both",
    )
    rule = RULES.get(engine)
    if not one_prompt or o.microbatches is not None or (not asked and rule is None):
        return spec  # the split into --microbatches (default pp)
    size, note = o.chunked_prefill_size, "--chunked-prefill-size"
    if size is None:
        require(rule is not None, "--enable-dynamic-chunking", engine, "needs --chunked-prefill-size without --engine")
        assert rule is not None
        if rule.chunked_by_default or dynamic:
            pol = engine_policy(engine, spec.device, tp=spec.parallel.tp, pp=spec.parallel.pp)
            size, note = pol.max_num_batched_tokens, f"{engine} default chunk {pol.max_num_batched_tokens}"
        else:
            size, note = input_length, f"{engine}: chunked prefill off by default, the prompt in one piece"
    most = min(limits.MAX_MICROBATCHES, limits.MAX_STAGE_MICROBATCHES // spec.parallel.pp)

    def check(n: int) -> None:
        require(
            n <= most,
            "--chunked-prefill-size",
            size,
            f"gives {n} chunks of the {input_length}-token prompt; at most {most} with --pp {spec.parallel.pp} "
            "(raise the chunk size)",
        )

    check(-(-input_length // size))
    smooth_factor = o.dynamic_chunking_smooth_factor
    chunks = plan_chunks(
        spec, input_length, size, dynamic=dynamic, smooth_factor=smooth_factor, use_disk_cache=o.use_cache
    )
    check(len(chunks))
    if dynamic:
        note = (
            f"SGLang dynamic chunking from {size} (smooth factor {smooth_factor:g}; quadratic "
            "fit of stage 0's time over 127 fresh prefills up to 1.25x the first chunk)"
        )
    return chunked_prefill_spec(spec, chunks, engine=engine if rule is not None else None, note=note)


def run_step(o: StepOptions) -> StepReport:
    """Simulate one forward step (``simcast simulate``): ``batch_size`` requests of ``input_length``
    prompt tokens (``phase="prefill"``) or one token each over ``context_length`` cached tokens
    (``"decode"``, default context: ``input_length``), on ``num_devices`` (default ``tp*pp*dp``) devices,
    split into ``microbatches`` (default ``pp``). ``engine``: cost kernels with that engine's fits
    (``"none"``: generic roofline); ``partition``: a rule or layer counts like ``"4,6,6,4"`` (default:
    the engine's rule). ``use_cache=False`` bypasses the on-disk trace cache. Speculative decoding
    (``speculative_config``: vLLM's JSON or mapping, or SGLang's ``speculative_*``; ``spec_acceptance``)
    needs ``phase="decode"``: the step is the verify step, the draft's time in ``speculative``. Times in
    seconds, memory in bytes; ``to_dict()`` is the ``--json`` form, ``to_dataframe()`` one row per stage (ms, GiB).
    """
    from simcast.sim.partition import simulate_partitioned

    spec = step_spec(o)
    report = simulate_partitioned(spec, use_disk_cache=o.use_cache)
    spec_dec = speculative_spec(spec.model, o)
    if spec_dec is None:
        return StepReport.of(report)
    report, block = speculative_step(
        report,
        spec_dec,
        engine=o.engine,
        batch_size=o.batch_size,
        context_length=o.context_length or o.input_length,
        use_cache=o.use_cache,
    )
    return StepReport.of(report, speculative=block)


simulate_step = one_call("simulate_step", StepOptions, run_step)
"""``simcast simulate`` as one call: :func:`run_step` on ``StepOptions(**keywords)``."""

"""CLI wiring for ``simcast calibrate-serving``: fit an engine's CPU overheads to measured serving runs
and write an engine profile (edge module: reads the run files, prints the residual table, writes YAML)."""

from __future__ import annotations

import argparse
import datetime
from dataclasses import dataclass, field

from simcast.api.common import TargetOptions
from simcast.api.options import Flag, opt, required
from simcast.cli.engine_args import add_engine_args, engine_kwargs
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import emit, same_file, write_text
from simcast.cli.shared_flags import add_fabric_args, add_precision_args, fabric_choice


@dataclass(frozen=True, kw_only=True)
class CalibrateServingFlags:
    """``simcast calibrate-serving``'s flags (the run files are a positional list): what the runs measured
    and where the fitted profile goes."""

    model: str = field(
        metadata=required(
            "the model the runs measured",
            flag=Flag(names=("--model",), help="the model the runs were measured on (shipped id or config.json)"),
        )
    )
    device: str = field(
        metadata=required(
            "the device the runs measured",
            flag=Flag(names=("--device",), help="the device they ran on (shipped profile or YAML path)"),
        )
    )
    tp: int = opt(
        1,
        "tensor-parallel size of the measured server",
        flag=Flag(names=("--tp",), help="tensor-parallel size of the measured server", value_type="devices"),
    )
    pp: int = opt(
        1,
        "pipeline-parallel size of the measured server",
        flag=Flag(names=("--pp",), help="pipeline-parallel size of the measured server", value_type="devices"),
    )
    dp: int = opt(
        1,
        "data-parallel replicas of the measured server",
        flag=Flag(names=("--dp",), help="data-parallel replicas of the measured server", value_type="devices"),
    )
    out: str = field(
        metadata=required(
            "the engine profile YAML written",
            flag=Flag(names=("--out",), help="engine profile YAML to write (.yaml or .yml)", value_type="profile_path"),
        )
    )
    steady_state: bool = opt(
        False,
        "fit closed-loop runs with the steady-state estimate",
        flag=Flag(
            names=("--steady-state",),
            help="fit closed-loop JSON runs (rate inf, --max-concurrency) with the steady-state estimate instead "
            "of replaying their requests (faster; ignores ramp-up and drain)",
            action="store_true",
        ),
    )
    random_range_ratio: float = opt(
        0.0,
        "the runs' --random-range-ratio, in [0, 1)",
        flag=Flag(
            names=("--random-range-ratio",),
            help="the runs' vllm bench serve --random-range-ratio (not saved in the JSON): replayed lengths are "
            "uniform in L*(1-r)..L*(1+r) around the mean L [0]",
            value_type="range_ratio",
        ),
    )


def add_calibrate_serving_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "results",
        nargs="+",
        metavar="RESULT",
        help="vllm bench serve --save-result JSON files (per-request arrays of --save-detailed used), "
        "sglang.bench_serving --output-file JSON lines (.jsonl), or CSVs with concurrency,input_len,output_len "
        "and any of ttft_ms,tpot_ms,output_throughput",
    )
    add_option_flags(p, CalibrateServingFlags, ("model", "device", "tp", "pp", "dp"))
    add_engine_args(p, default="vllm", settings=False)
    add_precision_args(p)
    add_fabric_args(p)
    add_option_flags(p, CalibrateServingFlags, ("out", "steady_state", "random_range_ratio"))
    add_option_flags(p, TargetOptions, ("use_cache",))


def cmd_calibrate_serving(a: argparse.Namespace) -> int:
    from simcast.calib.serving_fit.factor_fit import fit_corrections
    from simcast.calib.serving_fit.loo import leave_one_out
    from simcast.calib.serving_fit.profile_out import calibrated_policy, correction_provenance
    from simcast.calib.serving_fit.run_model import RunModel
    from simcast.calib.uncertainty.user_residuals import residuals_from_provenance
    from simcast.core.errors import require
    from simcast.core.fabrics import with_fabric
    from simcast.core.specs import ParallelSpec
    from simcast.deploy.deployment import Deployment
    from simcast.inputs.bench_results import read_run_file
    from simcast.inputs.loaders import load_device, load_model
    from simcast.render.correction_tables import format_factors, format_loo, format_user_intervals
    from simcast.render.overhead_tables import format_overhead_fit
    from simcast.serving.engine_profile import profile_for, profile_text
    from simcast.serving.steady.model import ServingConfig, Workload

    fabric = fabric_choice(a)  # the flags' bounds first, as argparse checks the others
    for flag, src in [("results", r) for r in a.results] + [("--engine-profile", a.engine_profile)]:
        ok = src is None or not same_file(a.out, src)
        require(ok, "--out", a.out, f"is the {flag} input {src}: write to another file")
    files = [read_run_file(path) for path in a.results]  # every file checked before any simulation
    model = load_model(a.model, quantization=a.quantization)
    device = with_fabric(load_device(a.device), fabric)
    require(a.pp <= model.num_layers, "--pp", a.pp, f"must be <= the model's {model.num_layers} layers")
    start_profile = profile_for(a.engine_profile, a.runtime, device, tp=a.tp, pp=a.pp) if a.engine_profile else None
    deployment = Deployment.build(
        model=model,
        device=device,
        parallel=ParallelSpec(tp=a.tp, pp=a.pp, dp=a.dp),
        engine=a.runtime,
        kv_cache_dtype=a.kv_cache_dtype,
    )
    base = ServingConfig(
        deployment=deployment,
        workload=Workload(input_length=1, output_length=1, max_batched_tokens=a.max_batched_tokens or 0),
        batch_size=1,
        max_num_seqs=a.max_num_seqs or 0,
        engine_profile=start_profile,
        **engine_kwargs(a),
    )
    runs = [r for f in files for r in f.runs]
    run_model = RunModel(base, replay=not a.steady_state, range_ratio=a.random_range_ratio, use_disk_cache=a.use_cache)
    corr = fit_corrections(run_model, runs, start=base.policy)
    fit = corr.overheads
    setup = f"{model.name}, TP={a.tp} PP={a.pp} DP={a.dp}, {device.name}"
    header = (
        f"simcast calibrate-serving: {model.name} on {base.parallel.world_size} x {device.name} "
        f"(TP={a.tp} | PP={a.pp} | DP={a.dp}), engine {a.runtime}, {len(runs)} run(s) from {len(files)} file(s); "
        f"step CPU = step_overhead_s + per_request_overhead_s x requests in the step"
    )
    emit(format_overhead_fit(fit, header))
    emit("\n" + format_factors(corr))
    loo = leave_one_out(run_model, runs, start=base.policy)
    emit("\n" + format_loo(loo))
    require(
        bool(fit.fitted),
        "RESULT",
        ", ".join(f.name for f in files)[:200],
        "determine neither overhead (" + "; ".join(why for _, why in fit.not_fitted) + "); no profile written",
    )
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    policy, prov = calibrated_policy(base.policy, fit, [(f.name, f.sha256) for f in files], setup, date)
    prov.update(correction_provenance(corr, loo))
    text = profile_text(policy, prov)
    out = write_text(a.out, "--out", text)
    emit(f"\nwrote {out}: use it with --engine-profile {out} (optimize, serve-config, bench-serve)")
    emit(f"  - {policy.describe()}")
    emit(format_user_intervals(residuals_from_provenance(prov, out.name), a.runtime, device.name))
    return 0

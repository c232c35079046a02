"""``simcast microbench --out my_gpu.csv``: measure this machine's kernels for a new device profile (edge module).

Plans the sweep (:mod:`simcast.calib.ondevice.bench_plan`), times it with torch
(:mod:`simcast.calib.ondevice.microbench`), and writes the generic measured-kernel CSV
(:mod:`simcast.calib.readers.measured_schema`) with what it ran on in the metadata columns;
``simcast calibrate my_gpu.csv --device-template T --out my_gpu.yaml`` turns it into a profile.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from simcast.api.options import Flag, opt, required
from simcast.cli.calibrate_template import check_profile_name
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import emit, write_atomic

FULL_SWEEP_MINUTES = 4
"""The full sweep's estimate on one accelerator at :data:`simcast.calib.ondevice.bench_plan.ASSUMED_RATES` (rounded;
tests/calib/test_microbench.py keeps it equal to :func:`~simcast.calib.ondevice.bench_plan.estimate_s`)."""


@dataclass(frozen=True, kw_only=True)
class MicrobenchFlags:
    """``simcast microbench``'s flags: where the CSV goes, which accelerator, how much to measure."""

    out: str = dataclasses.field(
        metadata=required(
            "the measured-kernel CSV written",
            flag=Flag(names=("--out",), help="CSV file to write (generic schema)", value_type="csv_path"),
        )
    )
    device: str = opt(
        "auto",
        "the torch device kernels run on",
        flag=Flag(
            names=("--device",),
            help="auto | cpu | cuda (NVIDIA, and AMD on ROCm builds) | xpu | npu [default auto: the first "
            "accelerator torch finds, else cpu]; kernels run on device 0 (pick it with CUDA_VISIBLE_DEVICES)",
        ),
    )
    name: str | None = opt(
        None,
        "the new profile's name (None: --out's file stem)",
        flag=Flag(
            names=("--name",),
            help="the new profile's name, written in the CSV's device column [default: --out's file stem]",
        ),
    )
    quick: bool = opt(
        False,
        "a tiny sweep",
        flag=Flag(
            names=("--quick",), help="a tiny sweep (one small model's shapes, bf16): seconds", action="store_true"
        ),
    )
    dry_run: bool = opt(
        False,
        "print the plan and its time estimate only",
        flag=Flag(
            names=("--dry-run",),
            help="print the plan and an estimate of how long it takes (full sweep: about "
            f"{FULL_SWEEP_MINUTES} min on one accelerator), measure nothing, write nothing",
            action="store_true",
        ),
    )


def add_microbench_args(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Time GEMMs (shapes of the shipped models' linear layers at TP 1-8, M 1..16384; bf16, fp16, fp8 where "
        "torch._scaled_mm runs), attention (scaled_dot_product_attention: causal prefill, decode against a KV "
        "sweep), elementwise adds and all-reduce (torch.distributed over 2, 4, 8... visible devices) on this "
        "machine and write the generic measured-kernel CSV. The full sweep takes about "
        f"{FULL_SWEEP_MINUTES} minutes on one 300 TFLOP/s accelerator (plus about half a minute per "
        "all-reduce group size); --dry-run prints the plan and the estimate for this machine, --quick runs a "
        "tiny sweep in seconds."
    )
    add_option_flags(p, MicrobenchFlags, ("out", "device", "name", "quick", "dry_run"))


def cmd_microbench(a: argparse.Namespace) -> int:
    from simcast.calib.ondevice import bench_plan as bp
    from simcast.calib.ondevice import microbench as mb
    from simcast.inputs.loaders import load_model

    name = check_profile_name(a.name or Path(a.out).stem, "--name")
    be = mb.resolve_backend(a.device)
    env = mb.environment(be)
    models = (bp.QUICK_MODEL,) if a.quick else bp.FULL_MODELS
    fp8, why = (None, "quick sweep: bf16 only") if a.quick else mb.fp8_dtype(be)
    dtypes = ("bf16",) if a.quick else ("bf16", "fp16") + (("fp8",) if fp8 is not None else ())
    notes = () if fp8 is not None else (f"gemm fp8: skipped, {why}",)
    plan = bp.make_plan(
        tuple(load_model(m) for m in models),
        quick=a.quick,
        dtypes=dtypes,
        devices=int(str(env["gpu_count"])),
        notes=notes,
    )
    rates = bp.ASSUMED_RATES["cpu" if be.name == "cpu" else "accelerator"]
    est = bp.estimate_s(plan, rates)
    emit(
        f"simcast microbench: {env['gpu_name']} ({env['runtime']}, torch {env['torch']}"
        + (f", driver {env['driver']}" if env["driver"] else "")
        + f", {env['gpu_count']} device(s) visible; kernels on device 0) -> {a.out} as device {name!r}"
    )
    emit(_plan_text(plan, models, be.name))
    emit(f"estimate: {_duration(est)} on {rates.label}")
    for n in plan.notes:
        emit(f"note: {n}")
    if a.dry_run:
        emit("dry run: nothing measured, nothing written")
        return 0
    t0 = time.perf_counter()
    compute = [c for c in plan.cases if c.kind != "allreduce"]
    done, skipped = mb.measure(compute, be, plan.timing, fp8, _progress(len(compute)))
    rows = [(c, t) for c, t in done]
    for g in plan.allreduce_gpus:
        cases = [c for c in plan.cases if c.kind == "allreduce" and c.gpus == g]
        try:
            times = mb.measure_allreduce(be, g, tuple(int(c.bytes or 0) for c in cases), plan.timing)
            rows += list(zip(cases, times))
        except Exception as e:  # noqa: BLE001  (a process group that fails to start: noted, the rest kept)
            skipped.append(f"allreduce over {g}: skipped ({type(e).__name__}: {str(e).strip()[:160]})")
    write_atomic(a.out, "--out", lambda tmp: tmp.write_text(_csv_text(rows, name, env)))
    took = time.perf_counter() - t0
    kinds = ", ".join(f"{n} {k}" for k, n in _counts(c for c, _ in rows).items())
    emit(f"wrote {a.out}: {len(rows)} rows ({kinds}) in {_duration(took)} (estimate {_duration(est)})")
    for n in skipped:
        emit(f"note: {n}")
    guess = bp.suggest_template(str(env["gpu_name"]))
    emit(
        f"next: simcast calibrate {a.out} --device-template {guess or '<closest shipped profile>'} "
        f"--out {Path(a.out).with_suffix('.yaml')}" + ("" if guess else "  (see simcast kernel --help for the list)")
    )
    return 0


def _counts(cases) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in cases:
        out[c.kind] = out.get(c.kind, 0) + 1
    return out


def _plan_text(plan, models: tuple[str, ...], backend: str) -> str:
    from simcast.calib.ondevice.bench_plan import QUICK_TIMING

    counts = plan.counts()
    t = plan.timing
    gemm_dtypes = sorted({c.dtype for c in plan.cases if c.kind == "gemm"})
    ms = sorted({c.m for c in plan.cases if c.kind == "gemm"})
    shapes = len({(c.n, c.k) for c in plan.cases if c.kind == "gemm"})
    how = "device events around each call, L2 flushed between repeats" if backend != "cpu" else "perf_counter"
    lines = [
        f"plan ({'quick' if t == QUICK_TIMING else 'full'} sweep, {len(plan.cases)} cases; shapes of "
        f"{', '.join(models)}):",
        f"  gemm               {counts.get('gemm', 0):5d}  {shapes} (N, K) x M {ms[0] if ms else '-'}.."
        f"{ms[-1] if ms else '-'} x {', '.join(gemm_dtypes)}",
        f"  attention_prefill  {counts.get('attention_prefill', 0):5d}  causal, one request, SDPA",
        f"  attention_decode   {counts.get('attention_decode', 0):5d}  one new token against a KV sweep, SDPA",
        f"  add                {counts.get('add', 0):5d}  tokens x hidden, bf16",
        f"  allreduce          {counts.get('allreduce', 0):5d}  "
        + (f"over {', '.join(map(str, plan.allreduce_gpus))} devices" if plan.allreduce_gpus else "skipped"),
        f"timing: {t.warmup} warm-up call(s), then repeats filling {t.target_s * 1e3:g} ms of kernel time "
        f"({t.min_reps}..{t.max_reps}); the median repeat is time_s; {how}",
    ]
    return "\n".join(lines)


def _duration(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else (f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h")


def _progress(total: int):
    marks = {max(1, round(total * f / 10)) for f in range(1, 11)}

    def tick(i: int) -> None:
        if i in marks:
            sys.stderr.write(f"  measured {i}/{total}\n")

    return tick


def _csv_text(rows, name: str, env: dict[str, object]) -> str:
    from simcast.calib.readers.measured_schema import GENERIC_COLUMNS, META_COLUMNS

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*GENERIC_COLUMNS, *META_COLUMNS])
    for case, t in rows:
        cells = {**dataclasses.asdict(case), "device": name, "time_s": f"{t:.6e}"}
        w.writerow(
            [
                *("" if cells.get(c) is None else cells[c] for c in GENERIC_COLUMNS),
                *(env.get(c, "") for c in META_COLUMNS),
            ]
        )
    return buf.getvalue()

"""Check the serving model against NVIDIA's published TensorRT-LLM FP8 figures (development set).

Reads ``../shared/calibration/serving/published_fp8.csv`` relative to the repository (path as the first
argument, or ``$SIMCAST_SERVING_CSV``); nothing is fitted to these rows. Prints each row's prediction and
the median / max absolute error per kind of row. Models run as ModelOpt FP8
checkpoints run in TensorRT-LLM: ``--quantization fp8`` (W8A8 GEMMs, 16-bit activations) and an FP8
KV cache.

- TTFT rows: one request on an idle system (``ttft_idle_s``), OSL 1.
- static-batch rows: the whole batch prefilled in one step, then OSL-1 decode steps at the
  mean context (TRT-LLM 0.9 ``gptSessionBenchmark``), output tokens/s per GPU.
- max-load rows: engine ``trtllm`` defaults, concurrency = what memory, ``max_batch_size`` and
  the token budget allow (the engine picks its own batch), output tokens/s of the deployment.
"""

from __future__ import annotations

import csv
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, estimate_serving, max_batch_for_memory
from simcast.serving.step import mixed_batch

MODELS = {
    "Llama-2-7B": "meta-llama/Llama-2-7b-hf",
    "Llama-2-70B": "meta-llama/Llama-2-70b-hf",
    "Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
    "Llama-3.1-70B": "meta-llama/Llama-3.1-70B",
    "Llama-3.1-405B": "meta-llama/Llama-3.1-405B",
    "Mixtral-8x7B": "mistralai/Mixtral-8x7B-v0.1",
}
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = (
    Path(os.environ.get("SIMCAST_CALIBRATION_DIR") or ROOT.parent / "shared" / "calibration")
    / "serving"
    / "published_fp8.csv"
)
"""``../shared/calibration/serving/published_fp8.csv`` resolved from the repository (``$SIMCAST_CALIBRATION_DIR``
replaces ``../shared/calibration``, e.g. from a worktree), as the tests find it."""


def device_of(hw: str) -> str:
    return "h200_sxm" if hw.upper().startswith("H200") else "h100_sxm"


def predict(row: dict) -> tuple[str, float] | None:
    name = MODELS.get(row["model"])
    if name is None:
        return None
    # ModelOpt FP8 as TensorRT-LLM runs it: W8A8 linear layers (per-tensor scales), 16-bit activations,
    # lm_head in 16 bits; trtllm-bench forces an FP8 KV cache with FP8 quantisation (bench/build/build.py),
    # and the v0.9 rows say "FP8 weights+FP8 KV cache".
    model = load_model(name, quantization="fp8")
    dev = load_device(device_of(row["hardware"]))
    tp, isl, osl = int(row["tp"]), int(row["isl"]), int(row["osl"])
    par = ParallelSpec(tp=tp, pp=int(row["pp"]), dp=int(row["dp"]))
    metric = row["metric"]
    if metric.startswith("TTFT"):
        cfg = ServingConfig(
            deployment=Deployment(model=model, device=dev, parallel=par, engine="trtllm", kv_cache_dtype="fp8"),
            workload=Workload(input_length=isl, output_length=1),
            batch_size=1,
            usage="offline",  # gptSessionBenchmark / trtllm-bench run in process: no API server
        )
        return "ttft", estimate_serving(cfg).ttft_idle_s * 1e3
    if "per GPU" in metric:
        b = int(row["batch"])
        cfg = ServingConfig(
            deployment=Deployment(model=model, device=dev, parallel=par, engine="trtllm", kv_cache_dtype="fp8"),
            workload=Workload(input_length=isl, output_length=osl, max_batched_tokens=b * isl),
            batch_size=b,
            usage="offline",  # gptSessionBenchmark / trtllm-bench run in process: no API server
        )
        c = coster_for(cfg)
        t = c.cycle_s(mixed_batch(0, 0, b, isl, 0), 1) + (osl - 1) * c.cycle_s(
            mixed_batch(b, isl + osl // 2, 0, 0, 0), 1
        )
        return "static", b * osl / t / par.world_size
    cfg = ServingConfig(
        deployment=Deployment(model=model, device=dev, parallel=par, engine="trtllm", kv_cache_dtype="fp8"),
        workload=Workload(input_length=isl, output_length=osl),
        batch_size=1,
        usage="offline",  # gptSessionBenchmark / trtllm-bench run in process: no API server
    )
    b = max(1, min(max_batch_for_memory(cfg), cfg.policy.max_num_seqs))
    return "max load", estimate_serving(replace(cfg, batch_size=b)).tokens_per_s


UNITS = {"ttft": "ms", "static": "tok/s/GPU", "max load": "tok/s"}


def main() -> int:
    """Print every row; with ``--markdown PATH`` also write the table (every row) for the docs."""
    args = sys.argv[1:]
    md_path = None
    if "--markdown" in args:
        i = args.index("--markdown")
        md_path = Path(args[i + 1])
        del args[i : i + 2]
    path = Path(args[0] if args else os.environ.get("SIMCAST_SERVING_CSV", DEFAULT_CSV))
    if not path.is_file():
        print(f"no published serving data at {path}; nothing to check")
        return 0
    errs: dict[str, list[float]] = {}
    md = [
        "| kind | GPU | model | TP | batch | ISL/OSL | measured | simcast | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    with path.open() as f:
        for row in csv.DictReader(f):
            got = predict(row)
            label = (
                f"{row['hardware']:<20} {row['model']:<15} tp{row['tp']} b{row['batch']:<8.8} {row['isl']}/{row['osl']}"
            )
            if got is None:
                print(f"skip  {label}  (model not supported)")
                continue
            kind, pred = got
            meas = float(row["value"])
            err = (pred - meas) / meas
            errs.setdefault(kind, []).append(abs(err))
            print(f"{kind:<8} {label}  measured {meas:>9.1f}  simcast {pred:>9.1f}  {err * 100:+6.1f}%")
            md.append(
                f"| {kind} ({UNITS[kind]}) | {row['hardware']} | {row['model']} | {row['tp']} | {row['batch']} | "
                f"{row['isl']}/{row['osl']} | {meas:,.1f} | {pred:,.1f} | {err * 100:+.1f}% |"
            )
    print()
    summary = ["", "| kind | rows | median abs error | max abs error |", "| --- | --- | --- | --- |"]
    for kind, e in errs.items():
        print(f"{kind:<8} rows {len(e):>2}: median |err| {statistics.median(e) * 100:5.1f}%  max {max(e) * 100:5.1f}%")
        summary.append(f"| {kind} | {len(e)} | {statistics.median(e) * 100:.1f}% | {max(e) * 100:.1f}% |")
    if md_path is not None:
        md_path.write_text("\n".join(md + summary) + "\n")
        print(f"wrote {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

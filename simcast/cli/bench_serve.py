"""CLI wiring for ``simcast bench-serve``: a simulated ``vllm bench serve`` run (edge module)."""

from __future__ import annotations

import argparse
import csv
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from simcast.api.bench import BenchOptions, run_bench
from simcast.api.layout_spelling import layout_reading
from simcast.api.moe_comm_options import MOE_COMM_FIELDS
from simcast.api.options import Flag, opt
from simcast.cli.engine_args import add_engine_args, serving_engine_args
from simcast.cli.option_flags import add_option_flags, option_values
from simcast.cli.outputs import (
    check_output_path,
    emit,
    output_path,
    run_metadata,
    write_atomic,
    write_bench_plot,
    write_json,
    write_report,
)
from simcast.cli.shared_flags import (
    add_fabric_args,
    add_output_args,
    add_partition_arg,
    add_precision_args,
    target_kwargs,
)
from simcast.cli.speculative import add_speculative_args, speculative_kwargs
from simcast.core.errors import SimcastInputError, require


def _save_result(path: str) -> str:
    """``--save-result PATH``: the JSON file and its ``.requests.csv`` sibling must both be writable."""
    output_path("--save-result")(path)
    output_path("--save-result")(str(Path(path).with_suffix(".requests.csv")))
    return path


def result_path(a: argparse.Namespace, engine: str, now: datetime) -> str | None:
    """Where ``--save-result`` writes, as ``vllm bench serve`` names it (``vllm/benchmarks/serve.py``
    @def9ce8: ``{label}-{request_rate}qps[-concurrency{N}]-{model base name}-{%Y%m%d-%H%M%S}.json`` in
    ``--result-dir``, or ``--result-filename``), with the label ``simcast-<engine>`` so a simulated result
    is never taken for a measured one; ``--save-result PATH`` names the file itself. None: nothing saved.
    ``--result-dir``/``--result-filename`` imply ``--save-result``."""
    if a.save_result is None and a.result_dir is None and a.result_filename is None:
        return None
    if a.save_result:  # --save-result PATH
        require(
            a.result_dir is None and a.result_filename is None,
            "--save-result",
            a.save_result,
            "give the file either as --save-result PATH or with --result-dir/--result-filename, not both",
        )
        return a.save_result
    conc = f"-concurrency{a.max_concurrency}" if a.max_concurrency is not None else ""
    base = Path(a.model).name if a.model else "model"
    name = a.result_filename or f"simcast-{engine}-{a.request_rate}qps{conc}-{base}-{now:%Y%m%d-%H%M%S}.json"
    return str(Path(a.result_dir or ".") / name)


_REQUESTS = (
    "tp",
    "pp",
    "dp",
    "tp_size",
    "dp_size",
    "ep",
    "dp_attention",
    "enable_attention_dp",
    "moe_dense_tp_size",
    "enable_dp_lm_head",
    "enable_expert_parallel",
    "ep_num_redundant_experts",
    "enable_eplb",
    "router",
    "request_rate",
    "burstiness",
    "num_prompts",
    "input_length",
    "output_length",
    "range_ratio",
    "range_ratio_meaning",
    "prefix_length",
    "dataset_name",
    "multiturn_turns",
    "dataset_path",
    "sharegpt_output_len",
    "max_concurrency",
    "num_warmups",
)
_CHUNKING = ("enable_dynamic_chunking", "dynamic_chunking_smooth_factor")
_DISAGG = (
    "serving_mode",
    "prefill_workers",
    "decode_workers",
    "prefill_layout",
    "decode_layout",
    "kv_transfer",
    "disagg_router",
)
BENCH_FLAGS = _REQUESTS + ("seed",) + _CHUNKING + MOE_COMM_FIELDS + _DISAGG
"""The :class:`BenchOptions` fields ``simcast bench-serve`` reads from its own flags (declared on the fields)."""


@dataclass(frozen=True, kw_only=True)
class BenchServeFlags:
    """``simcast bench-serve``'s flags that are not keywords of :func:`simcast.api.bench.bench_serve`: vllm
    bench serve's flags it accepts, and where ``--save-result`` writes."""

    ignore_eos: bool = opt(
        False,
        "accepted as vllm bench serve's flag",
        flag=Flag(
            names=("--ignore-eos",),
            help="accepted as vllm bench serve's flag: simcast always generates each request's full output length",
            action="store_true",
        ),
    )
    result_dir: str | None = opt(
        None,
        "folder of the --save-result file",
        flag=Flag(
            names=("--result-dir",),
            help="folder of the --save-result file (created if missing) [default: the current folder]",
        ),
    )
    result_filename: str | None = opt(
        None,
        "file name of the --save-result JSON",
        flag=Flag(
            names=("--result-filename",),
            help="file name of the --save-result JSON in --result-dir [default: "
            "simcast-<engine>-<rate>qps[-concurrency<N>]-<model>-<YYYYmmdd-HHMMSS>.json]",
        ),
    )


def add_bench_serve_args(p: argparse.ArgumentParser) -> None:
    add_option_flags(p, BenchOptions, ("model", "device"))
    add_option_flags(p, BenchOptions, _REQUESTS)
    add_option_flags(p, BenchServeFlags, ("ignore_eos",))
    add_option_flags(p, BenchOptions, ("seed",))
    add_partition_arg(p)
    add_engine_args(p, default="vllm")
    add_option_flags(p, BenchOptions, _CHUNKING)
    add_option_flags(p, BenchOptions, MOE_COMM_FIELDS)
    add_option_flags(p, BenchOptions, _DISAGG)
    add_speculative_args(p)
    add_fabric_args(p)
    add_precision_args(p)
    p.add_argument(  # nargs="?" with a const (alone: named as vLLM names it), which a Flag does not carry
        "--save-result",
        nargs="?",
        const="",
        default=None,
        type=_save_result_arg,
        metavar="PATH",
        help="write the result JSON as vllm bench serve does (its keys, plus run metadata under run) and a "
        "per-request CSV beside it (.requests.csv); alone: named as vLLM names it in --result-dir; "
        "with PATH: that file",
    )
    add_option_flags(p, BenchServeFlags, ("result_dir", "result_filename"))
    add_option_flags(p, BenchOptions, ("use_cache",))
    add_output_args(p, trace=False)


def _save_result_arg(v: str) -> str:
    return v if v == "" else _save_result(v)


def _checked_result_path(a: argparse.Namespace, now: datetime) -> str | None:
    """:func:`result_path`, its folder created when it is ``--result-dir``'s (as vLLM does), and both files
    checked writable before any work."""
    path = result_path(a, a.runtime, now)
    if path is None:
        return None
    flag = "--save-result" if a.save_result else ("--result-filename" if a.result_filename else "--result-dir")
    if not a.save_result and a.result_dir:
        try:
            os.makedirs(a.result_dir, exist_ok=True)
        except OSError as e:
            raise SimcastInputError("--result-dir", a.result_dir, f"could not be created ({e.strerror or e})") from None
    check_output_path(path, flag)
    check_output_path(str(Path(path).with_suffix(".requests.csv")), flag)
    return path


def cmd_bench_serve(a: argparse.Namespace) -> int:
    from simcast.render.bench_tables import format_bench, request_rows

    save_to = _checked_result_path(a, datetime.now(timezone.utc))  # before any work
    o = BenchOptions(
        **option_values(a, BenchOptions, BENCH_FLAGS),
        **target_kwargs(a),
        **serving_engine_args(a),
        **speculative_kwargs(a),
    )
    out = run_bench(o)
    d, res, cfg, source = out.to_dict(), out.run, out.config, out.source
    model, dev, par = cfg.model, cfg.device, cfg.parallel
    layout = f"TP={o.tp} | PP={o.pp} | DP={o.dp}" + (f" | EP={par.ep}" if par.ep > 1 else "")
    layout += " | attention-DP" if par.dp_attention else ""
    header = (
        f"simcast bench-serve: {model.name} on {cfg.parallel.world_size} x {dev.name} "
        f"({layout}), engine {cfg.runtime}, {res.steps} steps, "
        f"{res.distinct_batches} distinct step shapes simulated"
    )
    if a.serving_mode == "disagg":
        header = (
            f"simcast bench-serve --serving-mode disagg: {model.name}, {a.prefill_workers} prefill worker(s) "
            f"[{a.prefill_layout or 'the run layout'}] + {a.decode_workers} decode worker(s) "
            f"[{a.decode_layout or 'the run layout'}] (decode: {cfg.parallel.world_size} x {dev.name}), engine "
            f"{cfg.runtime}, {res.steps} steps, {res.distinct_batches} distinct step shapes simulated"
        )
    from simcast.api.search_uncertainty import BENCH_LABELS
    from simcast.render.interval_text import interval_lines

    reading = layout_reading(o)  # the engine-spelled layout flags, as read ("" for simcast's own)
    header += f"\nlayout: {reading}" if reading else ""
    emit("\n".join([format_bench(out.summary, header), *interval_lines(out.intervals, BENCH_LABELS)]))
    if a.plot:
        rate = "inf" if math.isinf(a.request_rate) else f"{a.request_rate:g}"
        write_bench_plot(
            res,
            a.plot,
            f"{model.name} on {cfg.parallel.world_size} x {dev.name} "
            f"({layout}), {cfg.runtime}, {d['num_prompts']} prompts, "
            f"rate {rate} req/s" + ("" if source == "random" else f", {source}"),
        )
    write_report(a, out)
    if save_to:
        meta = run_metadata(device=a.device, engine=cfg.runtime)
        d["run"] = meta
        rows = [{**r, **meta} for r in request_rows(res)]
        csv_path = str(Path(save_to).with_suffix(".requests.csv"))
        check_output_path(csv_path, "--save-result")  # both before either is written

        def write_rows(tmp: Path) -> None:
            with tmp.open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)

        write_json(save_to, "--save-result", d)
        write_atomic(csv_path, "--save-result", write_rows)
        emit(f"simcast: wrote {save_to} and {csv_path}", err=True)
    return 0

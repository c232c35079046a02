"""CLI wiring for ``simcast bench-serve``: a simulated ``vllm bench serve`` run (edge module)."""

from __future__ import annotations

import argparse
import csv
import math
import os
from datetime import datetime, timezone
from pathlib import Path

from simcast.api.bench import BenchOptions, run_bench
from simcast.cli.args import (
    DEVICES,
    REQUESTS,
    TOKENS,
    add_fabric_args,
    add_partition_arg,
    add_precision_args,
    float_in,
    int_in,
    target_kwargs,
)
from simcast.cli.engine_args import add_engine_args, serving_engine_args
from simcast.cli.outputs import (
    add_output_args,
    check_output_path,
    emit,
    output_path,
    run_metadata,
    write_atomic,
    write_bench_plot,
    write_json,
)
from simcast.cli.speculative import add_speculative_args, speculative_kwargs
from simcast.core.chunking import SGLANG_SMOOTH_FACTOR
from simcast.core.errors import SimcastInputError, bounded_repr, require
from simcast.inputs.limits import MAX_BENCH_PROMPTS

_MAX_RATE = 1e9  # requests/s


def _rate(v: str) -> float:
    """A request rate in requests/s: a finite number in [1e-6, 1e9], or inf (every request at t = 0)."""
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not (math.isinf(x) and x > 0) and not 1e-6 <= x <= _MAX_RATE:
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be a number in [1e-06, 1e+09] or inf")
    return x


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


def add_bench_serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="shipped model id or config.json path")
    p.add_argument("--device", required=True, help="shipped device profile or YAML path")
    p.add_argument("--tp", type=DEVICES, default=1, help="tensor-parallel size")
    p.add_argument("--pp", type=DEVICES, default=1, help="pipeline-parallel size")
    p.add_argument("--dp", type=DEVICES, default=1, help="replicas behind the router")
    p.add_argument("--router", default="round_robin", choices=("round_robin", "least_loaded"), help="DP router")
    p.add_argument("--request-rate", type=_rate, default=math.inf, help="requests/s, or inf (all at t=0) [inf]")
    p.add_argument(
        "--burstiness",
        type=float_in(1e-3, 1e3, "gamma shape"),
        default=1.0,
        help="gamma shape of inter-arrival gaps (1: Poisson)",
    )
    p.add_argument(
        "--num-prompts",
        type=int_in(1, MAX_BENCH_PROMPTS, "requests simulated"),
        default=1000,
        help=f"requests [1000, <= {MAX_BENCH_PROMPTS}]",
    )
    p.add_argument("--random-input-len", type=TOKENS, default=1024, help="prompt tokens [1024]")
    p.add_argument("--random-output-len", type=TOKENS, default=128, help="output tokens [128]")
    p.add_argument(
        "--random-range-ratio",
        type=_range_ratio,
        default=0.0,
        help="lengths uniform in L*(1-r)..L*(1+r), 0 <= r < 1 [0]",
    )
    p.add_argument(
        "--random-prefix-len",
        type=TOKENS,
        default=0,
        help="tokens of one prefix every random prompt starts with, before its --random-input-len own tokens "
        "(as vllm bench serve): the prefix cache serves it [0]",
    )
    p.add_argument(
        "--dataset-name",
        default="random",
        help="random (the --random-* lengths), multiturn (conversations: each turn's prompt is the history + a "
        "new --random-input-len message) or a shipped length distribution: sharegpt, arxiv_summarization, "
        "azure_conv_2023, ... (`simcast workloads` lists them) [random]",
    )
    p.add_argument(
        "--multiturn-turns",
        type=int_in(1, 1000, "turns per conversation"),
        default=None,
        help="turns per conversation of --dataset-name multiturn [2: LMSYS-Chat-1M's mean, arXiv 2309.11998]",
    )
    p.add_argument(
        "--dataset-path",
        "--dataset",
        dest="dataset_path",
        default=None,
        help="your trace, .jsonl or .csv: input_len,output_len (or num_prefill_tokens,num_decode_tokens or "
        "ContextTokens,GeneratedTokens), optional arrival_s (or arrived_at) and optional prefix_id,prefix_len "
        "(a shared prefix, for the prefix cache): replayed when it has arrival times, else its first "
        "--num-prompts rows at --request-rate",
    )
    p.add_argument(
        "--sharegpt-output-len",
        type=TOKENS,
        default=None,
        help="output tokens of every request of a dataset (not random), as vLLM's flag; with sharegpt, prompts "
        "whose prompt + output exceeds 2048 are dropped as vLLM drops them",
    )
    p.add_argument("--max-concurrency", type=REQUESTS, default=None, help="client-side limit on requests in flight")
    p.add_argument(
        "--num-warmups",
        type=int_in(0, MAX_BENCH_PROMPTS, "warm-up requests"),
        default=0,
        help="warm-up requests vllm bench serve sends and awaits before the timed run; accepted so its lines "
        "replay as they are, not simulated: the timed run starts on an idle, warm engine either way [0]",
    )
    p.add_argument(
        "--ignore-eos",
        action="store_true",
        help="accepted as vllm bench serve's flag: simcast always generates each request's full output length",
    )
    p.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0, help="random seed [0]")
    add_partition_arg(p, "uniform | vllm | sglang | trtllm | balanced")
    add_engine_args(p, default="vllm")
    p.add_argument(
        "--enable-dynamic-chunking",
        action="store_true",
        help="SGLang's dynamic chunking (--engine sglang, acts at --pp > 1 as in SGLang): a long prompt's chunks "
        "after the first (--max-num-batched-tokens / --chunked-prefill-size) are sized to take as long as the "
        "first, from a quadratic fit of stage 0's prefill time",
    )
    p.add_argument(
        "--dynamic-chunking-smooth-factor",
        type=float_in(0.0, 1.0, "SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR"),
        default=SGLANG_SMOOTH_FACTOR,
        help=f"how far a dynamic chunk moves from the first chunk's size toward the equal-time size "
        f"(SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR) [default {SGLANG_SMOOTH_FACTOR}]",
    )
    add_speculative_args(p)
    add_fabric_args(p)
    add_precision_args(p)
    p.add_argument(
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
    p.add_argument(
        "--result-dir",
        default=None,
        help="folder of the --save-result file (created if missing) [default: the current folder]",
    )
    p.add_argument(
        "--result-filename",
        default=None,
        help="file name of the --save-result JSON in --result-dir [default: "
        "simcast-<engine>-<rate>qps[-concurrency<N>]-<model>-<YYYYmmdd-HHMMSS>.json]",
    )
    p.add_argument("--no-cache", action="store_true", help="bypass the on-disk trace cache")
    add_output_args(p, trace=False)


def _save_result_arg(v: str) -> str:
    return v if v == "" else _save_result(v)


def _range_ratio(v: str) -> float:
    x = float_in(-1.0, 1.0)(v)
    if not 0 <= x < 1:
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be in [0, 1)")
    return x


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
    out = run_bench(
        BenchOptions(
            tp=a.tp,
            pp=a.pp,
            dp=a.dp,
            router=a.router,
            num_prompts=a.num_prompts,
            request_rate=a.request_rate,
            burstiness=a.burstiness,
            input_length=a.random_input_len,
            output_length=a.random_output_len,
            range_ratio=a.random_range_ratio,
            prefix_length=a.random_prefix_len,
            multiturn_turns=a.multiturn_turns,
            dataset_name=a.dataset_name,
            dataset_path=a.dataset_path,
            sharegpt_output_len=a.sharegpt_output_len,
            max_concurrency=a.max_concurrency,
            num_warmups=a.num_warmups,
            seed=a.seed,
            enable_dynamic_chunking=a.enable_dynamic_chunking,
            dynamic_chunking_smooth_factor=a.dynamic_chunking_smooth_factor,
            **target_kwargs(a),
            **serving_engine_args(a),
            **speculative_kwargs(a),
        )
    )
    d, res, cfg, source = out.to_dict(), out.run, out.config, out.source
    model, dev = cfg.model, cfg.device
    header = (
        f"simcast bench-serve: {model.name} on {cfg.parallel.world_size} x {dev.name} "
        f"(TP={a.tp} | PP={a.pp} | DP={a.dp}), engine {cfg.runtime}, {res.steps} steps, "
        f"{res.distinct_batches} distinct step shapes simulated"
    )
    emit(format_bench(out.summary, header))
    if a.plot:
        rate = "inf" if math.isinf(a.request_rate) else f"{a.request_rate:g}"
        write_bench_plot(
            res,
            a.plot,
            f"{model.name} on {cfg.parallel.world_size} x {dev.name} "
            f"(TP={a.tp} | PP={a.pp} | DP={a.dp}), {cfg.runtime}, {d['num_prompts']} prompts, "
            f"rate {rate} req/s" + ("" if source == "random" else f", {source}"),
        )
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

"""CLI wiring for ``simcast bench-serve``: a simulated ``vllm bench serve`` run (edge module)."""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

from simcast.cli.args import positive_int
from simcast.cli.outputs import add_output_args, write_bench_plot
from simcast.cli.serving import add_engine_args


def _rate(v: str) -> float:
    x = float(v)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"got {v!r}; must be a positive number or inf")
    return x


def add_bench_serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="shipped model id or config.json path")
    p.add_argument("--device", required=True, help="shipped device profile or YAML path")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel size")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel size")
    p.add_argument("--dp", type=positive_int, default=1, help="replicas behind the router")
    p.add_argument("--router", default="round_robin", choices=("round_robin", "least_loaded"), help="DP router")
    p.add_argument("--request-rate", type=_rate, default=math.inf, help="requests/s, or inf (all at t=0) [inf]")
    p.add_argument("--burstiness", type=_rate, default=1.0, help="gamma shape of inter-arrival gaps (1: Poisson)")
    p.add_argument("--num-prompts", type=positive_int, default=1000, help="requests [1000]")
    p.add_argument("--random-input-len", type=positive_int, default=1024, help="prompt tokens [1024]")
    p.add_argument("--random-output-len", type=positive_int, default=128, help="output tokens [128]")
    p.add_argument("--random-range-ratio", type=float, default=0.0, help="lengths uniform in L*(1-r)..L*(1+r) [0]")
    p.add_argument("--dataset", default=None, help="trace .jsonl/.csv with arrival_s,input_len,output_len")
    p.add_argument("--max-concurrency", type=positive_int, default=None, help="client-side limit on requests in flight")
    p.add_argument("--seed", type=int, default=0, help="random seed [0]")
    p.add_argument("--partition", default="vllm", help="uniform | vllm | explicit layer counts")
    add_engine_args(p, default="vllm")
    p.add_argument("--save-result", default=None, help="write the vllm-bench-serve JSON here (+ a per-request CSV)")
    p.add_argument("--no-cache", action="store_true", help="bypass the on-disk trace cache")
    add_output_args(p, trace=False)


def read_trace(path: str):
    from simcast.core.errors import require
    from simcast.serving.requests import RequestSpec
    p = Path(path)
    require(p.is_file(), "--dataset", path, "file not found")
    if p.suffix == ".jsonl":
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    else:
        with p.open() as f:
            rows = list(csv.DictReader(f))
    out = []
    for i, r in enumerate(rows):
        require(all(k in r for k in ("arrival_s", "input_len", "output_len")), f"--dataset row {i + 1}", r,
                "needs arrival_s, input_len, output_len")
        out.append(RequestSpec(arrival_s=float(r["arrival_s"]), input_len=int(r["input_len"]),
                               output_len=int(r["output_len"])))
    require(bool(out), "--dataset", path, "no requests")
    return out


def cmd_bench_serve(a: argparse.Namespace) -> int:
    from simcast.core.specs import ParallelSpec
    from simcast.inputs.loaders import load_device, load_model
    from simcast.render.bench_tables import bench_metrics, format_bench, request_rows
    from simcast.serving.model import (ServingConfig, Workload, coster_for, max_batch_for_memory, resolve_partition,
                                       tokens_held)
    from simcast.serving.requests import make_requests, simulate_requests

    reqs = read_trace(a.dataset) if a.dataset else make_requests(
        num_prompts=a.num_prompts, rate=a.request_rate, input_len=a.random_input_len, output_len=a.random_output_len,
        range_ratio=a.random_range_ratio, burstiness=a.burstiness, seed=a.seed)
    model, dev = load_model(a.model), load_device(a.device)
    cfg = ServingConfig(model=model, device=dev, parallel=ParallelSpec(tp=a.tp, pp=a.pp, dp=a.dp),
                        workload=Workload(input_length=a.random_input_len, output_length=a.random_output_len,
                                          max_batched_tokens=a.max_batched_tokens or 0),
                        batch_size=1, partition=a.partition, runtime=a.runtime, max_num_seqs=a.max_num_seqs or 0)
    cfg = resolve_partition(cfg, use_disk_cache=not a.no_cache)
    kv_tokens = max_batch_for_memory(cfg) * tokens_held(cfg)  # KV capacity of one replica, tokens
    res = simulate_requests(reqs, coster_for(cfg, not a.no_cache), kv_tokens_per_replica=kv_tokens, dp=a.dp,
                            router=a.router, max_concurrency=a.max_concurrency or 0)
    d = bench_metrics(res, request_rate=a.request_rate, burstiness=a.burstiness, max_concurrency=a.max_concurrency,
                      num_prompts=len(reqs))
    d.update(model_id=model.name, engine=cfg.runtime, tp=a.tp, pp=a.pp, dp=a.dp,
             assumptions=[cfg.policy.describe(),
                          "step cost: decodes as one group at their mean context, prompt chunks grouped by rounded "
                          "(chunk, context); PP: the step's decodes split into pp microbatches in flight",
                          f"KV capacity per replica {kv_tokens} tokens in {cfg.policy.kv_block_tokens}-token blocks"])
    header = (f"simcast bench-serve: {model.name} on {cfg.parallel.world_size} x {dev.name} "
              f"(TP={a.tp} | PP={a.pp} | DP={a.dp}), engine {cfg.runtime}, {res.steps} steps, "
              f"{res.distinct_batches} distinct step shapes simulated")
    print(format_bench(d, header))
    if a.plot:
        rate = "inf" if math.isinf(a.request_rate) else f"{a.request_rate:g}"
        write_bench_plot(res, a.plot, f"{model.name} on {cfg.parallel.world_size} x {dev.name} "
                                      f"(TP={a.tp} | PP={a.pp} | DP={a.dp}), {cfg.runtime}, {len(reqs)} prompts, "
                                      f"rate {rate} req/s" + (f", trace {Path(a.dataset).name}" if a.dataset else ""))
    if a.save_result:
        out = Path(a.save_result)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(d, indent=2))
        rows = request_rows(res)
        with out.with_suffix(".requests.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0

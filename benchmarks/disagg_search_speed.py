"""Speed of ``simcast optimize --serving-mode disagg`` (the xPyD deployment search, issue 26 item 4): wall and
CPU time (user + system of the child) of each case, median of ``--runs`` runs, the trace cache warm (one
unmeasured run first), split into the search alone (``--replay-top 0``: the steady-state estimate of every
whole-unit xPyD) and the search plus its closed-loop replay of the best deployment (``--replay-top 1``).

Cases: Llama-3.1-8B on 8 x H100 (one node: pools sharing it), DeepSeek-R1 (FP8) on 32 GB200 (trays of an NVL72
domain; TP4/TP8 x attention-DP pools), DeepSeek-R1 on 32 H200 with MTP in the decode pool.

Measured (one run, load average ~10 on the 2-core development machine; CPU s of the child, wall in brackets):
llama8b-h100x8 1.5 (13) search alone, 4.8 (37) with one replay; dsr1-gb200x32 2.8 (10), 19.9 (139);
dsr1-h200x32-mtp 5.5 (59), 24.1 (245). The copy in docs/serving_modes.md is the one to update.

Run: .venv/bin/python benchmarks/disagg_search_speed.py [--runs N] [--case NAME]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

CASES = {
    "llama8b-h100x8": [
        "--input-length", "2048", "--output-length", "256", "--num-devices", "8", "--tp-sizes", "1", "2", "4",
        "--device", "h100_sxm", "--ttft-limit", "2000", "--tpot-limit", "50", "meta-llama/Llama-3.1-8B",
    ],
    "dsr1-gb200x32": [
        "--input-length", "4096", "--output-length", "1024", "--num-devices", "32", "--tp-sizes", "4", "8",
        "--device", "gb200", "--engine", "sglang", "--ttft-limit", "5000", "--min-tokens-per-user", "30",
        "deepseek-ai/DeepSeek-R1",
    ],
    "dsr1-h200x32-mtp": [
        "--input-length", "4096", "--output-length", "1024", "--num-devices", "32", "--tp-sizes", "8",
        "--device", "h200_sxm", "--engine", "sglang", "--ttft-limit", "5000",
        "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}', "deepseek-ai/DeepSeek-R1",
    ],
}  # fmt: skip


def _run(args: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of ``simcast optimize --serving-mode disagg`` + ``args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(
        [sys.executable, "-m", "simcast", "optimize", "--serving-mode", "disagg", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    ).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--case", choices=sorted(CASES), action="append")
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for name in a.case or sorted(CASES):
        args = CASES[name]
        _run([*args, "--replay-top", "0"])  # the trace cache warm
        for replay in (0, 1):
            runs = [_run([*args, "--replay-top", str(replay)]) for _ in range(a.runs)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"{name:20s} --replay-top {replay}: wall {wall:6.1f} s, CPU {cpu:6.1f} s, exit {runs[0][2]}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Wall time of `simcast bench-serve` for Llama-3.1-8B on one H100 (vLLM engine defaults, ISL 1024 / OSL 128,
request rate inf): 1,000 prompts (warm trace cache) and 100,000 prompts. Targets: under 10 s and 3 min.
Also 1,000 prompts whose first 512 tokens are shared (--random-prefix-len 512: the prefix cache at work).

Run: .venv/bin/python benchmarks/bench_serve_speed.py [--skip-large]
"""

from __future__ import annotations

import subprocess
import sys
import time

ARGS = [
    "bench-serve",
    "--model",
    "meta-llama/Llama-3.1-8B",
    "--device",
    "h100_sxm",
    "--random-input-len",
    "1024",
    "--random-output-len",
    "128",
]
"""The run, less --num-prompts (``benchmarks/search_speed.py`` times it with 100,000)."""
BASE = [sys.executable, "-m", "simcast", *ARGS]


def timed(n: int, extra: tuple[str, ...] = ()) -> float:
    t = time.perf_counter()
    subprocess.run(BASE + ["--num-prompts", str(n), *extra], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


PREFIX = ("--random-input-len", "512", "--random-prefix-len", "512")  # same 1024-token prompts, half shared


if __name__ == "__main__":
    timed(10)  # warm the trace cache
    print(f"bench-serve 1,000 prompts (warm): {timed(1000):.2f} s (target < 10 s)")
    print(f"bench-serve 1,000 prompts, 512-token shared prefix (prefix cache): {timed(1000, PREFIX):.2f} s")
    if "--skip-large" not in sys.argv:
        print(f"bench-serve 100,000 prompts: {timed(100_000):.1f} s (target < 180 s)")

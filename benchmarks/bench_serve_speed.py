"""Wall time of `simcast bench-serve`.

Default: Llama-3.1-8B on one H100 (vLLM engine defaults, ISL 1024 / OSL 128, request rate inf): 1,000 prompts (warm
trace cache) and 100,000 prompts; targets under 10 s and 3 min. Also 1,000 prompts whose first 512 tokens are shared
(--random-prefix-len 512: the prefix cache at work).

``--commands``: each command of :data:`COMMANDS` (a DeepSeek-R1 run on 8 H200s and bench-serve runs of the CLI
snapshot set) timed in a fresh process, with ``--before DIR`` also timed on another checkout of simcast (e.g. a
worktree of the commit before a change: ``git worktree add ../before <commit>``) and the speed-up printed; then
the DeepSeek-R1 run twice in one process (the second run's steps come from the process-wide step-cost store,
:mod:`simcast.serving.step_cache`: a notebook's or an optimizer's repeated runs).

Run: .venv/bin/python benchmarks/bench_serve_speed.py [--skip-large] [--commands [--before DIR]]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

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
REPO = Path(__file__).resolve().parents[1]

R1 = (
    "bench-serve --model deepseek-ai/DeepSeek-R1 --device h200_sxm --engine sglang --tp 8 --num-prompts 640 "
    "--request-rate inf --max-concurrency 64 --random-input-len 1024 --random-output-len 1024 "
    "--random-range-ratio 0.8 --ignore-eos"
)
COMMANDS = {
    "deepseek-r1 tp8 sglang c64": R1,
    "qwen3-32b trtllm tp2 rate 8": "bench-serve --model Qwen/Qwen3-32B --device h100_sxm --engine trtllm --tp 2 "
    "--num-prompts 200 --request-rate 8 --random-input-len 1024 --random-output-len 256",
    "llama-70b vllm tp4 pp2": "bench-serve --model meta-llama/Llama-3.1-70B --device h100_sxm --engine vllm --tp 4 "
    "--pp 2 --num-prompts 200 --request-rate inf --random-input-len 2000 --random-output-len 200",
    "qwen3-235b sglang tp8 pp4": "bench-serve --model Qwen/Qwen3-235B-A22B --device h200_sxm --engine sglang --tp 8 "
    "--pp 4 --dp 1 --num-prompts 128 --request-rate inf --random-input-len 946 --random-output-len 951 "
    "--random-range-ratio 0.05 --mem-fraction-static 0.9 --max-model-len 16384 --max-num-seqs 512 "
    "--max-num-batched-tokens 16384",
    "qwen3-30b-a3b sglang eagle": "bench-serve --model Qwen/Qwen3-30B-A3B --device h100_sxm --engine sglang --tp 2 "
    "--num-prompts 100 --request-rate inf --max-concurrency 16 --random-input-len 1000 --random-output-len 200 "
    "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens 4",
}
"""Commands timed by ``--commands`` (all but the first from the CLI snapshot set)."""


def timed(n: int, extra: tuple[str, ...] = ()) -> float:
    t = time.perf_counter()
    subprocess.run(BASE + ["--num-prompts", str(n), *extra], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def cpu_s(command: str, tree: Path) -> float:
    """CPU seconds (user + system) of ``simcast COMMAND`` in a fresh process importing simcast from ``tree``
    (CPU time, not wall time: a shared machine's load does not count)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = os.times()
    subprocess.run(
        [sys.executable, "-m", "simcast", *command.split()],
        check=True,
        env=env,
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def twice_in_one_process() -> tuple[float, float]:
    """CPU seconds of the DeepSeek-R1 run, then of the same run again in the same process."""
    from simcast.cli.main import main

    out = []
    for _ in range(2):
        t = time.process_time()
        sys.stdout = open(os.devnull, "w")
        try:
            main(R1.split())
        finally:
            sys.stdout.close()
            sys.stdout = sys.__stdout__
        out.append(time.process_time() - t)
    return out[0], out[1]


PREFIX = ("--random-input-len", "512", "--random-prefix-len", "512")  # same 1024-token prompts, half shared


if __name__ == "__main__":
    if "--commands" in sys.argv:
        before = Path(sys.argv[sys.argv.index("--before") + 1]) if "--before" in sys.argv else None
        for name, cmd in COMMANDS.items():
            now = cpu_s(cmd, REPO)
            if before is None:
                print(f"{name:32s} {now:6.1f} s CPU")
            else:
                then = cpu_s(cmd, before)
                print(f"{name:32s} before {then:6.1f} s  after {now:6.1f} s CPU  (x{then / now:.1f})")
        first, second = twice_in_one_process()
        print(f"deepseek-r1 run twice in one process: {first:.1f} s, then {second:.1f} s CPU (shared step costs)")
        sys.exit(0)
    timed(10)  # warm the trace cache
    print(f"bench-serve 1,000 prompts (warm): {timed(1000):.2f} s (target < 10 s)")
    print(f"bench-serve 1,000 prompts, 512-token shared prefix (prefix cache): {timed(1000, PREFIX):.2f} s")
    if "--skip-large" not in sys.argv:
        print(f"bench-serve 100,000 prompts: {timed(100_000):.1f} s (target < 180 s)")

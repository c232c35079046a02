"""Time to simulate every stage of Llama-3.1-70B on H100, tp 4, pp 1/2/4/8, prefill and decode.

Prints, per configuration:
- cold:   empty trace cache, fresh process (includes `import torch` and torch.compile of stage modules)
- disk:   fresh process, trace cache on disk (no torch import at all)
- warm:   same process, traces in memory (what the optimizer sees per evaluated point)
Run: .venv/bin/python benchmarks/simulate_speed.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CONFIGS = [(phase, pp) for phase in ("prefill", "decode") for pp in (1, 2, 4, 8)]
CHILD = """
import sys, time
t0 = time.perf_counter()
from simcast.inputs.loaders import load_device, load_model
from simcast.sim.simulate import simulate
from simcast.core.specs import Batch, ParallelSpec, SimSpec
phase, pp = sys.argv[1], int(sys.argv[2])
m, d = load_model("meta-llama/Llama-3.1-70B"), load_device("h100_sxm")
b = Batch.prefill(8, 2048) if phase == "prefill" else Batch.decode(64, 2048)
spec = SimSpec(model=m, device=d, parallel=ParallelSpec(tp=4, pp=pp), batch=b, num_microbatches=pp)
t1 = time.perf_counter(); r = simulate(spec); t2 = time.perf_counter()
for _ in range(20): simulate(spec)
t3 = time.perf_counter()
print(f"{t2 - t0:.3f} {t2 - t1:.3f} {(t3 - t2) / 20 * 1e3:.3f} {'torch' in sys.modules} {r.latency_s * 1e3:.2f}")
"""


def run(phase: str, pp: int, cache: str) -> list[str]:
    env = dict(os.environ, SIMCAST_CACHE_DIR=cache)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, phase, str(pp)], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def main() -> None:
    print(
        f"{'phase':8} {'pp':>2} {'cold s':>7} {'(sim s)':>8} {'disk s':>7} "
        f"{'torch?':>6} {'warm ms':>8} {'latency ms':>11}"
    )
    for phase, pp in CONFIGS:
        with tempfile.TemporaryDirectory() as cache:
            cold = run(phase, pp, cache)
            disk = run(phase, pp, cache)
        print(
            f"{phase:8} {pp:>2} {float(cold[0]):7.2f} {float(cold[1]):8.2f} {float(disk[0]):7.3f} "
            f"{disk[3]:>6} {float(disk[2]):8.2f} {float(cold[4]):11.2f}"
        )
    print("cold = fresh process + empty trace cache (import torch + compile); disk = fresh process, cached traces;")
    print("torch? = whether the disk-cached run imported torch; warm = in-process re-simulation of the same spec")


if __name__ == "__main__":
    main()

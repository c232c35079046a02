"""Wall time and recovery of `simcast calibrate-serving` on the example of docs/usage.md: Llama-3.1-8B on one H100,
ISL 1024 / OSL 128 with --random-range-ratio 0.5, runs at --max-concurrency 8, 64, 256 and one at 8 requests/s
(2,400 requests), made by `simcast bench-serve` with a known truth of 3 ms per step + 10 us per request.
Targets: replay under 60 s, --steady-state under 10 s (warm trace cache).

Run: .venv/bin/python benchmarks/calibrate_serving_speed.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SIMCAST = [sys.executable, "-m", "simcast"]
SETUP = ["--model", "meta-llama/Llama-3.1-8B", "--device", "h100_sxm"]
LENGTHS = ["--random-input-len", "1024", "--random-output-len", "128", "--random-range-ratio", "0.5", "--seed", "7"]
TRUTH = {"engine": "vllm", "step_overhead_s": 3e-3, "per_request_overhead_s": 10e-6, "overhead_source": "truth"}


def run(args: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(SIMCAST + args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


if __name__ == "__main__":
    d = Path(tempfile.mkdtemp(prefix="simcast-calserve-"))
    (d / "truth.yaml").write_text(yaml.safe_dump(TRUTH))
    bench = ["bench-serve", *SETUP, *LENGTHS, "--engine-profile", str(d / "truth.yaml")]
    files = []
    for c, n in ((8, 80), (64, 640), (256, 1280)):
        files.append(str(d / f"c{c}.json"))
        run([*bench, "--max-concurrency", str(c), "--num-prompts", str(n), "--save-result", files[-1]])
    files.append(str(d / "rate8.json"))
    run([*bench, "--request-rate", "8", "--num-prompts", "400", "--save-result", files[-1]])
    cal = ["calibrate-serving", *files, *SETUP, "--random-range-ratio", "0.5"]
    for label, extra, target in (("replay", [], 60), ("--steady-state", ["--steady-state"], 10)):
        out = d / f"engine-{label.strip('-')}.yaml"
        secs = run([*cal, *extra, "--out", str(out)])
        prof = yaml.safe_load(out.read_text())
        print(
            f"calibrate-serving {label}: {secs:.1f} s (target < {target} s); step_overhead_s "
            f"{prof['step_overhead_s'] * 1e3:.3f} ms (truth 3), per_request_overhead_s "
            f"{prof['per_request_overhead_s'] * 1e6:.2f} us (truth 10)"
        )

"""Wall time of `simcast optimize` for Llama-3.1-70B on 8 x H100, tp {1,2,4,8} x pp {1,2,4,8},
ISL 2048 / OSL 512: first run with an empty trace cache, repeated run (disk cache), and in-process
(memory cache). When AIConfigurator is importable (set AIC_PYTHON to an interpreter that has it, or
install it in this venv), its equivalent search (`aiconfigurator cli exp`, agg, tp/pp candidates
[1,2,4,8]) runs in the same benchmark and the ratio is printed.

Run: .venv/bin/python benchmarks/search_speed.py
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time

ARGS = [
    "optimize",
    "--input-length",
    "2048",
    "--output-length",
    "512",
    "--num-devices",
    "8",
    "--tp-sizes",
    "1",
    "2",
    "4",
    "8",
    "--pp-sizes",
    "1",
    "2",
    "4",
    "8",
    "--device",
    "h100_sxm",
    "meta-llama/Llama-3.1-70B",
]


REFINE = ["--ttft-limit", "2000", "--refine-top", "3"]


def timed(cmd: list[str], env: dict | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


AIC_EXP_YAML = """\
exps: [agg_llama70b]
agg_llama70b:
  serving_mode: agg
  model_path: meta-llama/Meta-Llama-3.1-70B
  system_name: h100_sxm
  total_gpus: 8
  isl: 2048
  osl: 512
  agg_tp_candidates: [1, 2, 4, 8]
  agg_pp_candidates: [1, 2, 4, 8]
"""


class AICFailed(RuntimeError):
    """`aiconfigurator cli exp` exited non-zero or wrote no results."""


def _tail(proc: subprocess.CompletedProcess[str], n: int = 10) -> str:
    """Last n lines of stderr and of stdout (AIConfigurator logs its errors to stdout)."""

    def last(text: str) -> str:
        return "\n".join("    " + line for line in text.strip().splitlines()[-n:]) or "    (empty)"

    return f"last lines of stderr:\n{last(proc.stderr)}\n  last lines of stdout:\n{last(proc.stdout)}"


def _has_rows(csv_path: str) -> bool:
    with open(csv_path) as f:
        return len(f.read().strip().splitlines()) > 1


def aiconfigurator_s(tmp: str) -> float | None:
    """Wall time of AIConfigurator's equivalent agg search (`aiconfigurator cli exp`, offline).

    Returns None when no `aiconfigurator` executable sits next to AIC_PYTHON (default: this
    interpreter); raises AICFailed when the command fails or produces no result CSV.
    """
    py = os.environ.get("AIC_PYTHON", sys.executable)
    exe = os.path.join(os.path.dirname(py), "aiconfigurator")
    if not os.path.exists(exe):
        return None
    yaml_path = os.path.join(tmp, "aic_exp.yaml")
    save_dir = os.path.join(tmp, "aic_results")
    with open(yaml_path, "w") as f:
        f.write(AIC_EXP_YAML)
    cmd = [exe, "cli", "exp", "--yaml-path", yaml_path, "--save-dir", save_dir]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise AICFailed(f"exit code {proc.returncode}; {_tail(proc)}")
    csvs = glob.glob(os.path.join(save_dir, "**", "best_config_topn.csv"), recursive=True)
    if not any(_has_rows(c) for c in csvs):
        raise AICFailed(
            f"exit code 0 but no results (no non-empty best_config_topn.csv under {save_dir}); {_tail(proc)}"
        )
    return elapsed


def main() -> None:
    simcast = os.path.join(os.path.dirname(sys.executable), "simcast")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SIMCAST_CACHE_DIR=cache)
        cold = timed([simcast] + ARGS, env)
        warm = [timed([simcast] + ARGS, env) for _ in range(3)]
        refine = timed([simcast] + ARGS + REFINE, env)
        os.environ["SIMCAST_CACHE_DIR"] = cache
        import contextlib
        import io

        from simcast.cli.main import main as cli_main

        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(ARGS)
            t = time.perf_counter()
            cli_main(ARGS)
            inproc = time.perf_counter() - t
        torch_imported = "torch" in sys.modules
    print("simcast optimize, Llama-3.1-70B, 8 x H100, tp x pp = 4 x 4 candidates, ISL 2048 / OSL 512")
    print(f"  first run, empty trace cache : {cold:6.2f} s  (import torch + torch.compile of stage modules)")
    print(f"  repeated run (disk cache)    : {min(warm):6.2f} s  (best of 3; no torch import)")
    print(f"  in-process (memory cache)    : {inproc:6.2f} s  (torch imported in-process: {torch_imported})")
    print(f"  + {' '.join(REFINE)} : {refine:6.2f} s  (request-level bisection, disk cache)")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            aic = aiconfigurator_s(tmp)
    except AICFailed as e:
        print(f"  aiconfigurator cli exp       : FAILED ({e})")
        return
    if aic is None:
        print("  aiconfigurator: not importable here (pip install aiconfigurator, or set AIC_PYTHON)")
    else:
        print(f"  aiconfigurator cli exp       : {aic:6.2f} s")
        print(
            f"  ratio aiconfigurator / simcast: first run {aic / cold:.1f}x, repeated {aic / min(warm):.1f}x, "
            f"in-process {aic / inproc:.1f}x"
        )


if __name__ == "__main__":
    main()

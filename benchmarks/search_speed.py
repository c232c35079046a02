"""Speed targets of the optimizer and the request-level simulator (issue 15), median of ``--runs`` runs:

* ``simcast optimize`` for Llama-3.1-70B on 8 x H100, tp {1,2,4,8} x pp {1,2,4,8}, ISL 2048 / OSL 512 (the
  demo): the repeated run (trace cache on disk) >= 15x faster than AIConfigurator's equivalent search, and
  the first run with an empty trace cache >= 3x;
* ``simcast bench-serve`` with 100,000 prompts (Llama-3.1-8B, one H100, ISL 1024 / OSL 128, rate inf)
  under 3 minutes.

Wall and CPU time (user + system of the child) are both printed: on a shared machine the wall time moves
with the load, the CPU time much less. AIConfigurator's time is its measured run when it is importable
(set AIC_PYTHON to an interpreter that has it, or install it in this venv: ``aiconfigurator cli exp``,
agg, tp/pp candidates [1,2,4,8]), else the recorded :data:`AIC_RECORDED_S`.

The first run reads the shipped stage traces (simcast/data/traces) where they apply; ``--skip-compile``
leaves out the fallback's figure (shipped traces off: ``import torch`` and a compile per stage). The machine's
load average is printed before and after: on a shared machine every wall time moves with it.

Run: .venv/bin/python benchmarks/search_speed.py [--runs N] [--skip-bench-serve] [--skip-compile] [--skip-refine]
"""

from __future__ import annotations

import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bench_serve_speed import ARGS as BENCH_SERVE_ARGS  # this folder (run as a script)

from simcast.api.search_inputs import DEMO_MODEL, demo_flags

ARGS = ["optimize", *demo_flags(), DEMO_MODEL]  # make demo's search
REFINE = ["--ttft-limit", "2000", "--refine-top", "3"]
BENCH_SERVE = [*BENCH_SERVE_ARGS, "--num-prompts", "100000"]

AIC_RECORDED_S = 13.3
"""AIConfigurator 0.12.0 ``cli exp``, the same search (agg, tp/pp candidates [1,2,4,8]), measured with this
benchmark on the project's 2-core development machine (docs/speed.md)."""
TARGET_WARM_X, TARGET_COLD_X, TARGET_BENCH_SERVE_S = 15.0, 3.0, 180.0


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system) of one run. The child may write and read
    byte-code caches (``PYTHONDONTWRITEBYTECODE`` dropped: an installed package has its ``.pyc`` files; without
    them every run compiles simcast's sources anew, ~0.3 s)."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_of(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """Median wall and median CPU time of several runs."""
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


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


def aiconfigurator_s(tmp: str) -> tuple[float, float] | None:
    """(wall, CPU) seconds of AIConfigurator's equivalent agg search (`aiconfigurator cli exp`, offline).

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
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise AICFailed(f"exit code {proc.returncode}; {_tail(proc)}")
    csvs = glob.glob(os.path.join(save_dir, "**", "best_config_topn.csv"), recursive=True)
    if not any(_has_rows(c) for c in csvs):
        raise AICFailed(
            f"exit code 0 but no results (no non-empty best_config_topn.csv under {save_dir}); {_tail(proc)}"
        )
    return elapsed, cpu


def _ratio(aic: list[float], ours: list[float]) -> float:
    """Median over rounds of AIConfigurator's time over simcast's in the same round (both see the same
    load), or the recorded wall time over simcast's median when AIConfigurator was not run."""
    if aic:
        return statistics.median(a / o for a, o in zip(aic, ours))
    return AIC_RECORDED_S / statistics.median(ours)


def main() -> None:
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    simcast = os.path.join(os.path.dirname(sys.executable), "simcast")
    load_before = os.getloadavg()
    cold_runs, compile_runs, warm_runs, aic_runs = [], [], [], []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, SIMCAST_CACHE_DIR=cache)
        timed([simcast] + ARGS, env)  # fills the cache (and the interpreter's byte-code caches)
        for _ in range(runs):  # one round: simcast's runs and AIConfigurator's, back to back
            with tempfile.TemporaryDirectory() as fresh:
                cold_runs.append(timed([simcast] + ARGS, dict(os.environ, SIMCAST_CACHE_DIR=fresh)))
            if "--skip-compile" not in sys.argv:  # the fallback: nothing shipped applies, every stage compiled
                with tempfile.TemporaryDirectory() as fresh:
                    off = dict(os.environ, SIMCAST_CACHE_DIR=fresh, SIMCAST_SHIPPED_TRACES="0")
                    compile_runs.append(timed([simcast] + ARGS, off))
            warm_runs.append(timed([simcast] + ARGS, env))
            try:
                aic = aiconfigurator_s(tmp)
            except AICFailed as e:
                print(f"  aiconfigurator cli exp       : FAILED ({e})")
                aic = None
            if aic is not None:
                aic_runs.append(aic)
        refine = timed([simcast] + ARGS + REFINE, env) if "--skip-refine" not in sys.argv else None
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
        bench = None
        if "--skip-bench-serve" not in sys.argv:
            timed([simcast] + BENCH_SERVE[:-1] + ["10"], env)  # warm the 8B trace cache
            bench = median_of([timed([simcast] + BENCH_SERVE, env) for _ in range(runs)])
    load_after = os.getloadavg()
    cold, warm = median_of(cold_runs), median_of(warm_runs)
    print(f"simcast optimize, Llama-3.1-70B, 8 x H100, tp x pp in 4 x 4, ISL 2048 / OSL 512; median of {runs}")
    print(f"  load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after, on {os.cpu_count()} cores")
    print(f"  first run, empty trace cache : {cold[0]:6.2f} s wall, {cold[1]:6.2f} s CPU  (shipped traces)")
    if compile_runs:
        comp = median_of(compile_runs)
        print(
            f"  same, shipped traces off     : {comp[0]:6.2f} s wall, {comp[1]:6.2f} s CPU  "
            "(SIMCAST_SHIPPED_TRACES=0: import torch + compile every stage)"
        )
    print(f"  repeated run (disk cache)    : {warm[0]:6.2f} s wall, {warm[1]:6.2f} s CPU  (no torch import)")
    print(f"  in-process (memory cache)    : {inproc:6.2f} s  (torch imported in-process: {torch_imported})")
    if refine is not None:
        print(f"  + {' '.join(REFINE)} : {refine[0]:6.2f} s wall (request-level bisection, disk cache)")
    if bench is not None:
        print(
            f"simcast bench-serve, 100,000 prompts (Llama-3.1-8B, 1 x H100, ISL 1024 / OSL 128): {bench[0]:6.1f} s, "
            f"{bench[1]:6.1f} s CPU (target < {TARGET_BENCH_SERVE_S:.0f} s wall)"
        )
    aic_wall = [a[0] for a in aic_runs]
    aic_cpu = [a[1] for a in aic_runs]
    if aic_runs:
        print(
            f"  aiconfigurator cli exp       : {statistics.median(aic_wall):6.2f} s wall, "
            f"{statistics.median(aic_cpu):6.2f} s CPU (measured now, median of {len(aic_runs)}, one per round)"
        )
    else:
        how = "recorded wall time (not installed here: pip install aiconfigurator==0.12.0, or set AIC_PYTHON)"
        print(f"  aiconfigurator cli exp       : {AIC_RECORDED_S:6.2f} s ({how})")
    rounds = [("repeated", warm_runs, TARGET_WARM_X), ("first run", cold_runs, TARGET_COLD_X)]
    if compile_runs:
        rounds.append(("first run, shipped traces off", compile_runs, TARGET_COLD_X))
    for name, rs, target in rounds:
        walls, cpus = [r[0] for r in rs], [r[1] for r in rs]
        cpu_part = f", {_ratio(aic_cpu, cpus):.1f}x on CPU time" if aic_runs else ""
        print(
            f"  ratio aiconfigurator / simcast, {name}: {_ratio(aic_wall, walls):.1f}x on wall time{cpu_part} "
            f"(target >= {target:g}x)"
        )
    print(f"  ratio in-process: {(statistics.median(aic_wall) if aic_runs else AIC_RECORDED_S) / inproc:.1f}x")


if __name__ == "__main__":
    main()

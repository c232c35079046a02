"""Side by side with AIConfigurator (issue 19): the same aggregated-vs-disaggregated search in both tools.

Two cases, each tool given the same model, devices, engine, workload and limits (AIConfigurator's own
defaults: TTFT 2000 ms, TPOT 30 ms):

* DeepSeek-V3 on 16 x H200, SGLang, ISL 4096 / OSL 1024;
* Llama-3.1-70B on 8 x H100, TensorRT-LLM, ISL 4096 / OSL 1024.

simcast runs ``optimize --serving-mode both --json``; AIConfigurator runs ``aiconfigurator cli default
--serving-mode auto`` (its agg-vs-disagg comparison with its own search space and database) and its saved
``best_config_topn.csv`` files are read. For each tool the script prints the best aggregated and the best
disaggregated deployment (token/s/GPU, token/s/user, layouts, xPyD), which mode wins, and the wall time of
the search. Nothing is tuned toward the other tool; AIConfigurator's numbers are printed, never fitted.

AIConfigurator runs when ``AIC_PYTHON`` (default: this interpreter) can ``import aiconfigurator``, with
``AIC_PYTHONPATH`` prepended to its ``PYTHONPATH`` only (``pip install --target DIR aiconfigurator`` and
``AIC_PYTHONPATH=DIR`` keep its dependencies out of simcast's run); otherwise it is skipped with a note and
simcast runs alone. Wall time moves with the machine's load; the CPU time (user + system of the child) much less.

Run: .venv/bin/python benchmarks/disagg_vs_aiconfigurator.py [--case deepseek|llama] [--simcast-only]
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Case:
    """One comparison: the same deployment question asked of both tools."""

    key: str
    title: str
    simcast_model: str
    aic_model: str
    device: str  # simcast device profile and AIConfigurator system (both name H100/H200 SXM alike)
    engine: str  # simcast --engine and AIConfigurator --backend
    gpus: int
    isl: int
    osl: int
    ttft_ms: float = 2000.0  # AIConfigurator's default --ttft
    tpot_ms: float = 30.0  # AIConfigurator's default --tpot
    simcast_space: tuple[str, ...] = field(default=())


CASES = (
    Case(
        key="deepseek",
        title="DeepSeek-V3 on 16 x H200, SGLang, ISL 4096 / OSL 1024",
        simcast_model="deepseek-ai/DeepSeek-V3",
        aic_model="deepseek-ai/DeepSeek-V3",
        device="h200_sxm",
        engine="sglang",
        gpus=16,
        isl=4096,
        osl=1024,
        simcast_space=("--tp-sizes", "1", "2", "4", "8", "16", "--ep-sizes", "8", "16"),
    ),
    Case(
        key="llama",
        title="Llama-3.1-70B on 8 x H100, TensorRT-LLM, ISL 4096 / OSL 1024",
        simcast_model="meta-llama/Llama-3.1-70B",
        aic_model="meta-llama/Meta-Llama-3.1-70B",
        device="h100_sxm",
        engine="trtllm",
        gpus=8,
        isl=4096,
        osl=1024,
        simcast_space=("--tp-sizes", "1", "2", "4", "8", "--pp-sizes", "1", "2", "4"),
    ),
)


@dataclass(frozen=True, kw_only=True)
class Best:
    """One tool's best deployment of one mode (token/s per GPU and per user; layouts as the tool writes them)."""

    mode: str
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft_ms: float
    tpot_ms: float
    layout: str


@dataclass(frozen=True, kw_only=True)
class Outcome:
    tool: str
    wall_s: float
    cpu_s: float
    agg: Best | None
    disagg: Best | None
    note: str = ""

    @property
    def winner(self) -> str:
        if self.agg is None or self.disagg is None:
            return "agg" if self.agg else ("disagg" if self.disagg else "none")
        return "disagg" if self.disagg.tokens_per_s_per_gpu > self.agg.tokens_per_s_per_gpu else "agg"


def run_simcast(c: Case) -> Outcome:
    """``simcast optimize --serving-mode both`` on the case, timed (wall)."""
    cmd = [sys.executable, "-m", "simcast", "optimize", "--model", c.simcast_model, "--device", c.device]
    cmd += ["--engine", c.engine, "--num-devices", str(c.gpus), "--input-length", str(c.isl)]
    cmd += ["--output-length", str(c.osl), "--ttft-limit", f"{c.ttft_ms:g}", "--tpot-limit", f"{c.tpot_ms:g}"]
    cmd += [*c.simcast_space, "--serving-mode", "both", "--json"]
    proc, wall, cpu = timed(cmd)
    if proc.returncode != 0:
        return Outcome(tool="simcast", wall_s=wall, cpu_s=cpu, agg=None, disagg=None, note=proc.stderr[-400:])
    data = json.loads(proc.stdout)
    agg = disagg = None
    if data.get("agg"):
        a = data["agg"][0]
        agg = Best(
            mode="agg",
            tokens_per_s_per_gpu=a["tokens_per_s_per_device"],
            tokens_per_s_per_user=a["tokens_per_s_per_user"],
            ttft_ms=a["ttft_ms"],
            tpot_ms=a["tpot_ms"],
            layout=f"{a['parallel']}, batch {a['batch_size']} per replica",
        )
    if data.get("disagg"):
        d = data["disagg"][0]
        disagg = Best(
            mode="disagg",
            tokens_per_s_per_gpu=d["token/s/device"],
            tokens_per_s_per_user=1e3 / d["tpot"],
            ttft_ms=d["ttft"],
            tpot_ms=d["tpot"],
            layout=f"{d['ratio']}: P {d['prefill_parallel']}, D {d['decode_parallel']} batch {d['decode_batch_size']}",
        )
    note = data.get("verdict", {}).get("line", "")
    return Outcome(tool="simcast", wall_s=wall, cpu_s=cpu, agg=agg, disagg=disagg, note=note)


def aic_env() -> dict[str, str]:
    """The environment of AIConfigurator's runs: ``AIC_PYTHONPATH`` before the inherited ``PYTHONPATH``."""
    env = dict(os.environ)
    extra = os.environ.get("AIC_PYTHONPATH", "")
    if extra:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra, env.get("PYTHONPATH", "")) if p)
    return env


def aic_python() -> str | None:
    """An interpreter that can import aiconfigurator, or None."""
    py = os.environ.get("AIC_PYTHON", sys.executable)
    probe = subprocess.run([py, "-c", "import aiconfigurator.main"], capture_output=True, env=aic_env())
    return py if probe.returncode == 0 else None


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``cmd``; returns (the process, wall s, CPU s: user + system of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _f(row: dict, *names: str) -> float:
    for n in names:
        if row.get(n) not in (None, ""):
            return float(row[n])
    raise KeyError(f"none of {names} in AIConfigurator's CSV columns {sorted(row)}")


def _layout(r: dict, side: str = "") -> str:
    """AIConfigurator's parallel columns (``tp``, ``pp``, ``dp``, ``moe_tp``, ``moe_ep``; ``(p)``/``(d)`` prefixed)."""
    g = {k: r.get(side + k, "") for k in ("tp", "pp", "dp", "cp", "moe_tp", "moe_ep")}
    moe = f" etp{g['moe_tp']} ep{g['moe_ep']}" if g["moe_ep"] not in ("", "1") or g["moe_tp"] not in ("", "1") else ""
    cp = f" cp{g['cp']}" if g["cp"] not in ("", "1") else ""
    return f"tp{g['tp']} pp{g['pp']} dp{g['dp'] or 1}{cp}{moe}"


def _aic_best(save_dir: str, mode: str, total_gpus: int) -> Best | None:
    """The best row of AIConfigurator's ``<mode>/best_config_topn.csv``, by token/s/GPU over the whole
    cluster: its per-replica ``tokens/s/gpu`` times the share of the GPUs its whole replicas use (as its
    own summary table computes ``tokens/s/gpu_cluster``)."""
    files = sorted(glob.glob(os.path.join(save_dir, "**", mode, "best_config_topn.csv"), recursive=True))
    if not files:
        return None
    with open(files[0], newline="") as fh:  # AIConfigurator's own output, not a user file
        rows = list(csv.DictReader(fh))
    if not rows:
        return None

    def cluster(r: dict) -> float:
        if r.get("tokens/s/gpu_cluster"):
            return float(r["tokens/s/gpu_cluster"])
        n = int(float(r["num_total_gpus"]))
        return float(r["tokens/s/gpu"]) * (total_gpus // n) * n / total_gpus

    r = max(rows, key=cluster)
    n = int(float(r["num_total_gpus"]))
    if mode == "agg":
        layout = f"{_layout(r)}, batch {r.get('bs', '?')}, {total_gpus // n} x {n}-GPU replica(s)"
    else:
        layout = (
            f"{r['(p)workers']}P{r['(d)workers']}D: P {_layout(r, '(p)')} batch {r.get('(p)bs', '?')}, "
            f"D {_layout(r, '(d)')} batch {r.get('(d)bs', '?')}, {total_gpus // n} x {n}-GPU replica(s)"
        )
    return Best(
        mode=mode,
        tokens_per_s_per_gpu=cluster(r),
        tokens_per_s_per_user=_f(r, "tokens/s/user"),
        ttft_ms=_f(r, "ttft"),
        tpot_ms=_f(r, "tpot"),
        layout=layout,
    )


def run_aiconfigurator(c: Case, py: str, keep: str | None = None) -> Outcome:
    """``aiconfigurator cli default --serving-mode auto`` on the case, timed; its results go to ``keep/<case>``
    when given (else a temporary folder)."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = os.path.join(keep, c.key) if keep else scratch
        cmd = [py, "-W", "ignore", "-m", "aiconfigurator.main", "cli", "default", "--model", c.aic_model]
        cmd += ["--total-gpus", str(c.gpus), "--system", c.device, "--backend", c.engine]
        cmd += ["--isl", str(c.isl), "--osl", str(c.osl), "--ttft", f"{c.ttft_ms:g}", "--tpot", f"{c.tpot_ms:g}"]
        cmd += ["--serving-mode", "auto", "--save-dir", tmp, "--log-level", "WARNING"]
        proc, wall, cpu = timed(cmd, aic_env())
        if proc.returncode != 0:
            return Outcome(
                tool="aiconfigurator", wall_s=wall, cpu_s=cpu, agg=None, disagg=None, note=proc.stderr[-400:]
            )
        agg, disagg = _aic_best(tmp, "agg", c.gpus), _aic_best(tmp, "disagg", c.gpus)
        return Outcome(tool="aiconfigurator", wall_s=wall, cpu_s=cpu, agg=agg, disagg=disagg)


def show(c: Case, outcomes: list[Outcome]) -> None:
    print(f"\n== {c.title}; limits TTFT {c.ttft_ms:g} ms, TPOT {c.tpot_ms:g} ms")
    for o in outcomes:
        print(f"-- {o.tool}: search {o.wall_s:.1f} s wall, {o.cpu_s:.1f} s CPU; winner: {o.winner}")
        for b in (o.agg, o.disagg):
            if b is None:
                continue
            print(
                f"   {b.mode:6s} {b.tokens_per_s_per_gpu:8.1f} token/s/GPU  {b.tokens_per_s_per_user:6.1f} token/s/user"
                f"  ttft {b.ttft_ms:7.1f} ms  tpot {b.tpot_ms:6.2f} ms  {b.layout}"
            )
        if o.note:
            print(f"   {o.note}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=[c.key for c in CASES], action="append", help="run only these cases")
    p.add_argument("--simcast-only", action="store_true", help="do not run AIConfigurator")
    p.add_argument("--aic-save-dir", help="keep AIConfigurator's result folders here (one per case)")
    p.add_argument(
        "--aic-results", help="read AIConfigurator's results from this folder (one per case) instead of running it"
    )
    a = p.parse_args(argv)
    py = None if a.simcast_only or a.aic_results else aic_python()
    if py is None and not (a.simcast_only or a.aic_results):
        print("AIConfigurator not importable (pip install aiconfigurator, or set AIC_PYTHON): simcast only")
    for c in CASES:
        if a.case and c.key not in a.case:
            continue
        outcomes = [run_simcast(c)]
        if a.aic_results:
            d = os.path.join(a.aic_results, c.key)
            agg, dis = _aic_best(d, "agg", c.gpus), _aic_best(d, "disagg", c.gpus)
            outcomes.append(Outcome(tool="aiconfigurator (saved)", wall_s=0.0, cpu_s=0.0, agg=agg, disagg=dis))
        elif py is not None:
            outcomes.append(run_aiconfigurator(c, py, a.aic_save_dir))
        show(c, outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""simcast against public vLLM / SGLang / PP serving measurements (our development set).

Reads ``benchmarks/devset/serving_public.csv`` and ``benchmarks/devset/pp_public.csv`` (columns defined in
``benchmarks/devset/README.md``), runs simcast on every distinct configuration the way a user would (the CLI,
``python -m simcast bench-serve`` with the engine's flags), and compares each measured figure with simcast's.
Nothing is fitted to these rows: they are for finding mechanisms, never for tuning a constant to one row.

- ``burst`` rows: ``vllm bench serve --request-rate inf`` with N prompts -> ``bench-serve --request-rate inf
  --num-prompts N`` (the whole finite run, ramp-up and drain included, as the measurement).
- ``concurrency`` rows: ``--max-concurrency C`` -> the same flag.
- ``single`` rows: one request on an idle engine (speed = (prompt + output tokens) / end-to-end time) ->
  ``bench-serve --num-prompts 1 --max-concurrency 1``.

Engine memory and scheduler flags in the CSV (``gpu_memory_utilization``, ``mem_fraction_static``,
``max_model_len``, ``max_num_seqs``, ``max_num_batched_tokens``) and ``--dataset-name`` are passed only when
``bench-serve --help`` lists the flag, so the runner works before and after simcast grows them; a flag that
could not be passed is named in the table.

Usage::

    python benchmarks/serving_devset.py [--rows ID,ID] [--markdown PATH] [--timeout S] [CSV ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVSET = HERE / "devset"
DEFAULT_CSVS = (DEVSET / "serving_public.csv", DEVSET / "pp_public.csv")
RESERVED = DEVSET / "reserved_sources.txt"

COLUMNS = (
    "id kind engine engine_version model hf_id gpu device num_gpus tp pp dp ep quantization kv_cache_dtype "
    "dataset isl osl range_ratio num_prompts request_rate max_concurrency gpu_memory_utilization "
    "mem_fraction_static max_model_len max_num_seqs max_num_batched_tokens speculative_config metric value unit "
    "source notes confidence"
).split()
COLUMNS = tuple(COLUMNS)
# Every row must fill these (the configuration a re-run needs); the engine flags may be blank (= engine default).
REQUIRED = (
    "id kind engine engine_version model hf_id gpu device num_gpus tp pp dp quantization dataset isl osl "
    "num_prompts request_rate metric value unit source confidence"
).split()
KINDS = ("burst", "concurrency", "single")
ENGINES = ("vllm", "sglang", "trtllm", "atom")
# metric -> (key in bench-serve's --save-result JSON, unit)
METRICS = {
    "output_throughput": ("output_throughput", "tok/s"),
    "total_throughput": ("total_token_throughput", "tok/s"),
    "request_throughput": ("request_throughput", "req/s"),
    "median_ttft": ("median_ttft_ms", "ms"),
    "mean_ttft": ("mean_ttft_ms", "ms"),
    "median_tpot": ("median_tpot_ms", "ms"),
    "mean_tpot": ("mean_tpot_ms", "ms"),
    "median_e2el": ("median_e2el_ms", "ms"),
    "speed": ("", "tok/s"),  # single rows: (isl + osl) / mean E2EL
}
# CSV column -> the engine's flag name on simcast's CLI (passed only if bench-serve --help lists it).
ENGINE_FLAGS = {
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "mem_fraction_static": "--mem-fraction-static",
    "max_model_len": "--max-model-len",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
}
CONFIG_KEYS = tuple(c for c in COLUMNS if c not in ("metric", "value", "unit", "source", "notes", "confidence"))


def reserved_patterns(path: Path = RESERVED) -> list[re.Pattern[str]]:
    """The reserved-source list as compiled case-insensitive patterns (comments and blank lines skipped)."""
    lines = path.read_text().splitlines()
    return [re.compile(s.strip(), re.IGNORECASE) for s in lines if s.strip() and not s.lstrip().startswith("#")]


def load_rows(paths: list[Path]) -> list[dict[str, str]]:
    """Every row of the CSVs, checked: known columns, complete configuration, a source that is not reserved."""
    pats = reserved_patterns()
    rows: list[dict[str, str]] = []
    for path in paths:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise SystemExit(f"{path}: columns must be exactly {' '.join(COLUMNS)}")
            for i, row in enumerate(reader, start=2):
                missing = [c for c in REQUIRED if not row[c].strip()]
                if missing:
                    raise SystemExit(f"{path}:{i}: row {row['id']!r} lacks {', '.join(missing)}")
                if row["kind"] not in KINDS or row["engine"] not in ENGINES or row["metric"] not in METRICS:
                    raise SystemExit(f"{path}:{i}: unknown kind, engine or metric in row {row['id']!r}")
                hit = [p.pattern for p in pats if p.search(row["source"]) or p.search(row["notes"])]
                if hit:
                    raise SystemExit(f"{path}:{i}: row {row['id']!r} cites a reserved source ({hit[0]})")
                row["_file"] = path.name
                rows.append(row)
    return rows


_HELP: dict[str, str] = {}


def cli_help(command: str) -> str:
    """``python -m simcast COMMAND --help`` (cached): which flags this simcast accepts."""
    if command not in _HELP:
        out = subprocess.run(
            [sys.executable, "-m", "simcast", command, "--help"], capture_output=True, text=True, check=False
        )
        _HELP[command] = out.stdout
    return _HELP[command]


def _accepts(command: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", cli_help(command)) is not None


@dataclass
class Run:
    """One simcast invocation for one configuration, and what came of it."""

    argv: list[str]
    skipped_flags: list[str] = field(default_factory=list)
    result: dict | None = None
    error: str = ""

    @property
    def command(self) -> str:
        return "simcast " + " ".join(shlex.quote(a) for a in self.argv)


def build_run(row: dict[str, str]) -> Run:
    """The bench-serve command a user would type for this row's configuration."""
    cmd = "bench-serve"
    argv = [cmd, "--model", row["model"], "--device", row["device"], "--engine", row["engine"]]
    argv += ["--tp", row["tp"], "--pp", row["pp"], "--dp", row["dp"]]
    kind = row["kind"]
    if kind == "single":
        argv += ["--num-prompts", "1", "--max-concurrency", "1", "--request-rate", "inf"]
    else:
        argv += ["--num-prompts", row["num_prompts"], "--request-rate", row["request_rate"]]
        if kind == "concurrency":
            argv += ["--max-concurrency", row["max_concurrency"]]
    skipped: list[str] = []
    if row["dataset"] not in ("random", "") and _accepts(cmd, "--dataset-name"):
        argv += ["--dataset-name", row["dataset"]]
    else:
        if row["dataset"] not in ("random", ""):
            skipped.append(f"--dataset-name {row['dataset']} (random lengths at the measured means instead)")
        argv += ["--random-input-len", row["isl"], "--random-output-len", row["osl"]]
        if row["range_ratio"] not in ("", "0"):
            argv += ["--random-range-ratio", row["range_ratio"]]
    if row["quantization"] not in ("", "none"):
        argv += ["--quantization", row["quantization"]]
    if row["kv_cache_dtype"] not in ("", "auto"):
        argv += ["--kv-cache-dtype", row["kv_cache_dtype"]]
    if row["speculative_config"]:
        argv += ["--speculative-config", row["speculative_config"]]
    for col, flag in ENGINE_FLAGS.items():
        if not row[col]:
            continue
        if _accepts(cmd, flag):
            argv += [flag, row[col]]
        else:
            skipped.append(f"{flag} {row[col]}")
    return Run(argv=argv, skipped_flags=skipped)


def execute(run: Run, timeout_s: float) -> None:
    """Run simcast; keep its --save-result JSON (or the one-line error)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "simcast", *run.argv, "--save-result", str(out)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            run.error = f"timed out after {timeout_s:.0f} s"
            return
        if proc.returncode != 0 or not out.is_file():
            last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
            run.error = last[:300]
            return
        run.result = json.loads(out.read_text())


def predicted(row: dict[str, str], run: Run) -> float | None:
    if run.result is None:
        return None
    if row["metric"] == "speed":
        e2e_s = run.result["mean_e2el_ms"] / 1e3
        return (float(row["isl"]) + float(row["osl"])) / e2e_s if e2e_s > 0 else None
    value = run.result.get(METRICS[row["metric"]][0])
    return float(value) if value is not None else None


def config_key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(row[k] for k in CONFIG_KEYS)


def evaluate(rows: list[dict[str, str]], timeout_s: float = 900.0, log=print) -> list[dict]:
    """Run each distinct configuration once; one record per CSV row with predicted, measured and error."""
    runs: dict[tuple[str, ...], Run] = {}
    records = []
    for row in rows:
        key = config_key(row)
        if key not in runs:
            runs[key] = build_run(row)
            log(f"[{row['id']}] {runs[key].command}")
            execute(runs[key], timeout_s)
            if runs[key].error:
                log(f"    error: {runs[key].error}")
        run = runs[key]
        meas = float(row["value"])
        pred = predicted(row, run)
        err = None if pred is None else (pred - meas) / meas
        records.append({"row": row, "run": run, "measured": meas, "predicted": pred, "error": err})
    return records


def _fmt(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:,.2f}"


def markdown_table(records: list[dict]) -> str:
    """Every row (predicted, measured, error), then median |error| per kind, metric and engine, then the commands."""
    out = [
        "| id | kind | engine | model | GPU x n | TP/PP | workload | metric | measured | simcast | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        row = r["row"]
        wl = f"{row['dataset']} {row['isl']}/{row['osl']}, n={row['num_prompts']}"
        wl += f", c={row['max_concurrency']}" if row["kind"] == "concurrency" else ""
        err = "error" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        out.append(
            f"| {row['id']} | {row['kind']} | {row['engine']} {row['engine_version']} | {row['hf_id']} | "
            f"{row['device']} x {row['num_gpus']} | {row['tp']}/{row['pp']} | {wl} | {row['metric']} ({row['unit']}) | "
            f"{_fmt(r['measured'])} | {_fmt(r['predicted'])} | {err} |"
        )
    groups: dict[str, list[float]] = {}
    failed: dict[str, int] = {}
    for r in records:
        row = r["row"]
        for g in ("all rows", f"kind {row['kind']}", f"metric {row['metric']}", f"engine {row['engine']}"):
            if r["error"] is None:
                failed[g] = failed.get(g, 0) + 1
            else:
                groups.setdefault(g, []).append(abs(r["error"]))
    out += [
        "",
        "| group | rows | median abs error | max abs error | rows simcast could not run |",
        "| --- | --- | --- | --- | --- |",
    ]
    for g in sorted(set(groups) | set(failed), key=lambda g: (g != "all rows", g)):
        e = groups.get(g, [])
        med = f"{statistics.median(e) * 100:.1f}%" if e else "n/a"
        mx = f"{max(e) * 100:.1f}%" if e else "n/a"
        out.append(f"| {g} | {len(e)} | {med} | {mx} | {failed.get(g, 0)} |")
    out += ["", "Commands (one per configuration; flags simcast's CLI does not accept yet are listed, not passed):", ""]
    seen = set()
    for r in records:
        run, row = r["run"], r["row"]
        if id(run) in seen:
            continue
        seen.add(id(run))
        extra = f" — not passed: {'; '.join(run.skipped_flags)}" if run.skipped_flags else ""
        fail = f" — **simcast error**: {run.error}" if run.error else ""
        out.append(f"- `{row['id']}`: `{run.command}`{extra}{fail}")
    return "\n".join(out) + "\n"


def markdown(records: list[dict]) -> str:
    """One section per CSV file (``## serving_public.csv`` ...), each a :func:`markdown_table`."""
    files: dict[str, list[dict]] = {}
    for r in records:
        files.setdefault(r["row"]["_file"], []).append(r)
    return "\n".join(f"## {name}\n\n{markdown_table(recs)}" for name, recs in files.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="*", type=Path, help="dev-set CSVs [serving_public.csv pp_public.csv]")
    ap.add_argument("--rows", default="", help="comma-separated row ids to run (default: all)")
    ap.add_argument("--markdown", type=Path, default=None, help="write the tables here")
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("SIMCAST_DEVSET_TIMEOUT", 900)))
    a = ap.parse_args(argv)
    rows = load_rows(list(a.csv) or list(DEFAULT_CSVS))
    if a.rows:
        want = set(a.rows.split(","))
        rows = [r for r in rows if r["id"] in want]
    records = evaluate(rows, a.timeout)
    text = markdown(records)
    print(text)
    if a.markdown is not None:
        a.markdown.write_text(text)
        print(f"wrote {a.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

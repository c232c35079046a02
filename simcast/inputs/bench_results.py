"""Measured serving runs for ``simcast calibrate-serving``: ``vllm bench serve --save-result`` JSON files
and plain CSVs, read through the checked loaders into frozen dataclasses (edge module).

A ``--save-result`` JSON (keys as ``vllm/benchmarks/serve.py`` writes them: setup keys ``num_prompts``,
``request_rate`` — a number or the string ``"inf"`` —, ``burstiness``, ``max_concurrency`` — null when
unbounded —, ``model_id``; results ``completed``, ``total_input_tokens``, ``total_output_tokens`` (successful
requests only), ``output_throughput`` (output tokens / benchmark duration, tokens/s) and ``mean_ttft_ms``,
``mean_tpot_ms`` — TPOT per request is ``(latency - ttft) / (output_len - 1)``, averaged over requests with
two or more output tokens) is one run. Lengths per request are the totals divided by ``completed``
(a mean: a run with ``--random-range-ratio`` > 0 is replayed at its mean lengths). Other keys are ignored.

A CSV holds one run per row: columns ``concurrency,input_len,output_len`` and any of ``ttft_ms``,
``tpot_ms``, ``output_throughput`` (tokens/s, all replicas); every row needs ``tpot_ms`` or
``output_throughput``. Its runs are closed loops at that concurrency (no request count, no rate).

``sglang.bench_serving --output-file`` JSON lines (``.jsonl``, or a ``.json`` holding several lines) are
one run per line, same keys (:mod:`simcast.inputs.bench_details`); per-request arrays (``--save-detailed``,
``--output-details``) give each request's lengths, replayed as measured.

Which model, device and layout a run was measured on comes only from the command's flags.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcast.core.errors import SimcastInputError, require
from simcast.inputs.bench_details import json_documents, request_details
from simcast.inputs.files import MAX_CSV_BYTES, decode_utf8, loads_csv, numeric_column, read_bytes
from simcast.inputs.limits import MAX_LIMIT_MS, MAX_REQUESTS, MAX_TOKENS
from simcast.inputs.schema import Int, Num, Str

MAX_THROUGHPUT = 1e12
"""Output tokens/s of one run: a million GPUs at a million tokens/s each."""
MIN_MEASURED_MS = 1e-3
"""Shortest measured TTFT or TPOT read, ms (1 us: no engine step is shorter; 1e-300 made the fit overflow)."""
MIN_THROUGHPUT = 1e-3
"""Lowest measured output throughput read, tokens/s."""
MAX_TOTAL_TOKENS = 10**15
"""``total_input_tokens`` / ``total_output_tokens`` of one run (MAX_TOKENS x 10^8 requests)."""
MAX_COMPLETED = 10**8
"""Requests of one run."""
CSV_COLUMNS = ("concurrency", "input_len", "output_len", "ttft_ms", "tpot_ms", "output_throughput")


@dataclass(frozen=True, kw_only=True)
class MeasuredRun:
    """One measured run. Times in seconds; ``None``: not measured."""

    source: str  # "b16.json" or "sweep.csv line 3"
    concurrency: int  # the client's max concurrency (requests in flight); 0: unbounded
    request_rate_per_s: float  # math.inf: every request sent at t = 0
    burstiness: float  # gamma shape of the inter-arrival gaps (1: Poisson)
    num_requests: int  # completed requests; 0: unknown (a CSV row: steady state only)
    input_len: int  # tokens per request (mean)
    output_len: int  # tokens per request (mean)
    ttft_s: float | None
    tpot_s: float | None  # None also when outputs have a single token (TPOT undefined)
    output_tokens_per_s: float | None  # all replicas
    model_id: str = ""
    # (input, output) tokens of each completed request when the file has per-request arrays (replayed at
    # these lengths instead of the means); (): not given
    request_lens: tuple[tuple[int, int], ...] = ()
    range_ratio: float | None = None  # the run's --random-range-ratio when the file saves it (SGLang); None: not

    def __post_init__(self) -> None:
        require(
            self.tpot_s is not None or self.output_tokens_per_s is not None,
            self.source,
            None,
            "needs a measured TPOT (outputs of 2+ tokens) or an output throughput to fit anything",
        )


@dataclass(frozen=True, kw_only=True)
class RunFile:
    name: str  # file name as given (no folder)
    sha256: str  # of the bytes read
    runs: tuple[MeasuredRun, ...]


def read_run_file(path: str) -> RunFile:
    """The runs in one ``--save-result`` JSON (``.json``) or CSV (any other suffix); bad input: one line."""
    field = "RESULT"
    data = read_bytes(path, field, MAX_CSV_BYTES)  # --save-detailed files carry per-request arrays
    name = Path(path).name
    text = decode_utf8(data, field, str(path))
    suffix = Path(path).suffix.lower()
    if suffix in (".json", ".jsonl"):
        docs = json_documents(text, f"RESULT {name}", lines=suffix == ".jsonl")
        runs = tuple(_json_run(doc, name if len(docs) == 1 else f"{name} line {k + 1}") for k, doc in enumerate(docs))
    else:
        runs = _csv_runs(text, name, path)
    return RunFile(name=name, sha256=hashlib.sha256(data).hexdigest(), runs=runs)


def _get(doc: dict[str, Any], key: str, schema: Any, where: str, required: bool = True) -> Any:
    if doc.get(key) is None:
        require(not required, f"{where}: {key}", None, "is required (a vllm bench serve --save-result key)")
        return None
    return schema.check(doc[key], f"{where}: {key}")


def _json_run(doc: Any, name: str) -> MeasuredRun:
    where = f"RESULT {name}"
    require(isinstance(doc, dict), where, doc, "must be a JSON object (vllm bench serve --save-result)")
    completed = _get(doc, "completed", Int(1, MAX_COMPLETED), where)
    tin = _get(doc, "total_input_tokens", Int(1, MAX_TOTAL_TOKENS), where)
    tout = _get(doc, "total_output_tokens", Int(1, MAX_TOTAL_TOKENS), where)
    rate_raw = doc.get("request_rate")
    require(rate_raw is not None, f"{where}: request_rate", None, 'is required: requests/s or "inf"')
    rate = math.inf if rate_raw == "inf" else Num(0.0, 1e9, lo_open=True).check(rate_raw, f"{where}: request_rate")
    conc = _get(doc, "max_concurrency", Int(1, MAX_REQUESTS), where, required=False) or 0
    burst = _get(doc, "burstiness", Num(1e-3, 1e3), where, required=False) or 1.0
    ttft = _get(doc, "mean_ttft_ms", Num(MIN_MEASURED_MS, MAX_LIMIT_MS), where, required=False)
    tpot = _get(doc, "mean_tpot_ms", Num(0.0, MAX_LIMIT_MS), where, required=False)
    tps = _get(doc, "output_throughput", Num(MIN_THROUGHPUT, MAX_THROUGHPUT), where, required=False)
    model_id = doc.get("model_id")
    ratio = _get(doc, "random_range_ratio", Num(0.0, 1.0), where, required=False)
    details = request_details(doc, where)
    if details is not None:
        ttft = ttft if ttft is not None else _ms(details.mean_ttft_s)
        tpot = tpot if tpot is not None else _ms(details.mean_tpot_s)
    isl, osl = round(tin / completed), round(tout / completed)
    for key, n in (("total_input_tokens", isl), ("total_output_tokens", osl)):
        require(
            1 <= n <= MAX_TOKENS,
            f"{where}: {key}",
            doc[key],
            f"gives {n} tokens per completed request; must be in [1, {MAX_TOKENS}]",
        )
    if osl < 2:
        tpot = None  # TPOT is undefined for one-token outputs (vLLM writes 0)
    elif tpot is not None:
        require(
            tpot >= MIN_MEASURED_MS,
            f"{where}: mean_tpot_ms",
            tpot,
            f"must be >= {MIN_MEASURED_MS:g} ms (1 us) when outputs have 2 or more tokens",
        )
    if details is not None:
        require(
            len(details.lens) == completed,
            f"{where}: output_lens",
            len(details.lens),
            f"completed requests in the per-request arrays; completed is {completed}",
        )
    return MeasuredRun(
        source=name,
        concurrency=conc,
        request_rate_per_s=rate,
        burstiness=burst,
        num_requests=completed,
        input_len=isl,
        output_len=osl,
        ttft_s=ttft / 1e3 if ttft is not None else None,
        tpot_s=tpot / 1e3 if tpot is not None else None,
        output_tokens_per_s=tps,
        model_id=Str().check(model_id, f"{where}: model_id") if model_id is not None else "",
        request_lens=details.lens if details is not None else (),
        range_ratio=ratio if ratio is not None and ratio < 1.0 else None,
    )


def _ms(x: float | None) -> float | None:
    return None if x is None else max(x * 1e3, MIN_MEASURED_MS)


def _csv_runs(text: str, name: str, path: str) -> tuple[MeasuredRun, ...]:
    df = loads_csv(text, "RESULT", path)
    where = f"RESULT {name}"
    unknown = [c for c in df.columns if c not in CSV_COLUMNS]
    require(not unknown, f"{where}: column {unknown[0] if unknown else ''}", None, f"allowed: {', '.join(CSV_COLUMNS)}")
    c = numeric_column(df, "concurrency", where, required=True, lo=1, hi=MAX_REQUESTS, integer=True)
    i = numeric_column(df, "input_len", where, required=True, lo=1, hi=MAX_TOKENS, integer=True)
    o = numeric_column(df, "output_len", where, required=True, lo=1, hi=MAX_TOKENS, integer=True)
    ttft = numeric_column(df, "ttft_ms", where, lo=MIN_MEASURED_MS, hi=MAX_LIMIT_MS)
    tpot = numeric_column(df, "tpot_ms", where, lo=MIN_MEASURED_MS, hi=MAX_LIMIT_MS)
    tps = numeric_column(df, "output_throughput", where, lo=MIN_THROUGHPUT, hi=MAX_THROUGHPUT)

    def opt(x: Any, scale: float = 1.0) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x) * scale

    runs = []
    for k in range(len(df)):
        line = f"{name} line {k + 2}"
        t = opt(tpot.iloc[k], 1e-3)
        if int(o.iloc[k]) < 2 and t is not None:
            raise SimcastInputError(f"{where}: column tpot_ms, line {k + 2}", tpot.iloc[k], "needs output_len >= 2")
        runs.append(
            MeasuredRun(
                source=line,
                concurrency=int(c.iloc[k]),
                request_rate_per_s=math.inf,
                burstiness=1.0,
                num_requests=0,
                input_len=int(i.iloc[k]),
                output_len=int(o.iloc[k]),
                ttft_s=opt(ttft.iloc[k], 1e-3),
                tpot_s=t,
                output_tokens_per_s=opt(tps.iloc[k]),
            )
        )
    return tuple(runs)

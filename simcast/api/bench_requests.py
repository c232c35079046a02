"""The requests of a ``simcast bench-serve`` run: random lengths, a shipped length distribution, or the
user's own trace file (``--dataset-path``, read through ``simcast.inputs.files``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from simcast.core.errors import require
from simcast.inputs.limits import MAX_BENCH_PROMPTS, MAX_TOKENS

if TYPE_CHECKING:
    from simcast.serving.requests import RequestSpec

_TRACE_COLUMNS = {
    "arrival_s": ("arrival_s", "arrived_at"),
    "input_len": ("input_len", "num_prefill_tokens", "ContextTokens"),
    "output_len": ("output_len", "num_decode_tokens", "GeneratedTokens"),
}
"""Columns of a ``--dataset-path`` trace and the names they go by: simcast's own, Vidur's processed traces,
the Azure LLM inference traces (whose ``TIMESTAMP`` is not read: replay them at --request-rate)."""
_TRACE_BOUNDS = {
    "arrival_s": (0.0, 1e9, False),
    "input_len": (1, MAX_TOKENS, True),
    "output_len": (1, MAX_TOKENS, True),
}
"""Bounds of each column: (lowest, highest, whole number); arrival within 31 years."""


@dataclass(frozen=True, kw_only=True)
class Trace:
    """A ``--dataset-path`` file: per-request token counts and, when it has them, send times (s)."""

    input_lens: list[int]
    output_lens: list[int]
    arrivals_s: list[float] | None


def read_trace(path: str) -> Trace:
    """A ``.jsonl`` (one object per line) or ``.csv`` trace, through the checked loaders."""
    import pandas as pd

    from simcast.inputs.files import MAX_CSV_BYTES, load_csv, loads_json, numeric_column, read_text

    field = "--dataset-path"
    p = Path(path)
    require(
        p.suffix in (".jsonl", ".csv"),
        field,
        path,
        "must be a .jsonl or .csv of token counts (a ShareGPT .json is not tokenized here: "
        "--dataset-name sharegpt uses the shipped distribution)",
    )
    if p.suffix == ".jsonl":
        lines = [(i, s) for i, s in enumerate(read_text(p, field, MAX_CSV_BYTES).splitlines(), 1) if s.strip()]
        require(bool(lines), field, path, "holds no requests")
        require(len(lines) <= MAX_BENCH_PROMPTS, field, path, f"holds more than {MAX_BENCH_PROMPTS} requests")
        recs = []
        for i, s in lines:
            r = loads_json(s, f"{field} line {i}")
            require(isinstance(r, dict), f"{field} line {i}", r, "must be a JSON object")
            recs.append({k: "" if r.get(k) is None else str(r[k]) for k in r})
        df = pd.DataFrame(recs)
        line_of = [i for i, _ in lines]
    else:
        df = load_csv(p, field)
        require(len(df) <= MAX_BENCH_PROMPTS, field, path, f"holds more than {MAX_BENCH_PROMPTS} requests")
        line_of = None
    cols = {}
    for c, names in _TRACE_COLUMNS.items():
        found = [n for n in names if n in df.columns]
        require(
            c == "arrival_s" or bool(found),
            f"{field} {p.name}: column {c}",
            None,
            f"is required (named one of: {', '.join(names)})",
        )
        if found:
            lo, hi, whole = _TRACE_BOUNDS[c]
            col = numeric_column(
                df, found[0], f"{field} {p.name}", required=True, lo=lo, hi=hi, integer=whole, lines=line_of
            )
            cols[c] = col.tolist()
    return Trace(
        input_lens=[int(x) for x in cols["input_len"]],
        output_lens=[int(x) for x in cols["output_len"]],
        arrivals_s=[float(x) for x in cols["arrival_s"]] if "arrival_s" in cols else None,
    )


def build_requests(
    *,
    num_prompts: int,
    request_rate: float,
    burstiness: float = 1.0,
    seed: int = 0,
    dataset_name: str = "random",
    dataset_path: str | None = None,
    sharegpt_output_len: int | None = None,
    random_input_len: int = 1024,
    random_output_len: int = 128,
    random_range_ratio: float = 0.0,
) -> tuple[list[RequestSpec], str, str]:
    """The run's requests from the dataset arguments, a short label of where their lengths came from
    (``random`` for the random dataset) and the assumption line that states it ("" for random)."""
    from simcast.inputs.workloads import load_distribution
    from simcast.serving.requests import RequestSpec, make_requests, requests_from_lengths

    name, path, olen = dataset_name, dataset_path, sharegpt_output_len
    if path:
        require(
            name in ("random", "custom"),
            "--dataset-path",
            path,
            f"is a trace of your own; drop --dataset-name {name} (shipped distributions need no file) "
            "or use --dataset-name custom",
        )
        t = read_trace(path)
        outs = t.output_lens if olen is None else [olen] * len(t.output_lens)
        if t.arrivals_s is not None:
            reqs = [
                RequestSpec(arrival_s=x, input_len=i, output_len=o) for x, i, o in zip(t.arrivals_s, t.input_lens, outs)
            ]
            return reqs, f"trace {Path(path).name}", "request lengths and send times: replayed from the trace"
        reqs = requests_from_lengths(
            t.input_lens, outs, num_prompts=num_prompts, rate=request_rate, burstiness=burstiness, seed=seed
        )
        note = (
            f"request lengths: the trace's first {min(num_prompts, len(t.input_lens))} rows in file order"
            + (", the rest drawn from its rows with replacement" if num_prompts > len(t.input_lens) else "")
            + "; send times: gamma gaps at --request-rate"
        )
        return reqs, f"trace {Path(path).name}", note
    require(name != "custom", "--dataset-name", name, "custom needs --dataset-path FILE")
    if name == "random":
        require(
            olen is None,
            "--sharegpt-output-len",
            olen,
            "applies to a dataset (--dataset-name sharegpt, ... or --dataset-path); random uses --random-output-len",
        )
        reqs = make_requests(
            num_prompts=num_prompts,
            rate=request_rate,
            input_len=random_input_len,
            output_len=random_output_len,
            range_ratio=random_range_ratio,
            burstiness=burstiness,
            seed=seed,
        )
        return reqs, "random", ""
    dist = load_distribution(name)
    if olen is not None:
        dist = dist.with_output_tokens(olen)
    reqs = make_requests(num_prompts=num_prompts, rate=request_rate, burstiness=burstiness, seed=seed, lengths=dist)
    label = f"dataset {name}" + (f" (output {olen})" if olen is not None else "")
    note = (
        f"request lengths: drawn i.i.d. (seed {seed}) from the shipped {name} distribution "
        f"({len(dist.weights)} histogram cells of {dist.provenance.get('rows')} source rows, "
        f"{dist.provenance.get('tokenizer')} tokens; docs/workloads.md)"
        + (f", output set to {olen} tokens" if olen is not None else "")
    )
    return reqs, label, note

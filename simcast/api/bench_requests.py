"""The requests of a ``simcast bench-serve`` run: random lengths, a shipped length distribution, or the
user's own trace file (``--dataset-path``, read through ``simcast.inputs.files``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from simcast.api.options import Flag, opt
from simcast.core.errors import require
from simcast.core.lengths import RANGE_MEANINGS
from simcast.inputs.limits import MAX_BENCH_PROMPTS, MAX_TOKENS

if TYPE_CHECKING:
    from simcast.serving.request_level.simulate import RequestSpec

_TRACE_COLUMNS = {
    "arrival_s": ("arrival_s", "arrived_at"),
    "input_len": ("input_len", "num_prefill_tokens", "ContextTokens"),
    "output_len": ("output_len", "num_decode_tokens", "GeneratedTokens"),
    "prefix_id": ("prefix_id",),
    "prefix_len": ("prefix_len",),
}
"""Columns of a ``--dataset-path`` trace and the names they go by: simcast's own, Vidur's processed traces,
the Azure LLM inference traces (whose ``TIMESTAMP`` is not read: replay them at --request-rate). Optional
``prefix_id`` (an integer naming a shared prefix) and ``prefix_len`` (its tokens, at most the row's
input_len): rows with the same id start with the same tokens, for the prefix cache."""
_TRACE_BOUNDS = {
    "arrival_s": (0.0, 1e9, False),
    "input_len": (1, MAX_TOKENS, True),
    "output_len": (1, MAX_TOKENS, True),
    "prefix_id": (0, 2**31 - 1, True),
    "prefix_len": (0, MAX_TOKENS, True),
}
"""Bounds of each column: (lowest, highest, whole number); arrival within 31 years."""


@dataclass(frozen=True, kw_only=True)
class Trace:
    """A ``--dataset-path`` file: per-request token counts and, when it has them, send times (s)."""

    input_lens: list[int]
    output_lens: list[int]
    arrivals_s: list[float] | None
    prefix_ids: list[int] | None = None
    prefix_lens: list[int] | None = None


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
            c not in ("input_len", "output_len") or bool(found),
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
    require(
        ("prefix_id" in cols) == ("prefix_len" in cols),
        f"{field} {p.name}: column prefix_id",
        None,
        "and prefix_len go together (a shared prefix's id and its tokens)",
    )
    ins = [int(x) for x in cols["input_len"]]
    if "prefix_len" in cols:
        bad = next((k for k, (n, i) in enumerate(zip(cols["prefix_len"], ins)) if n > i), None)
        require(
            bad is None,
            f"{field} {p.name}: row {(bad or 0) + 1} prefix_len",
            cols["prefix_len"][bad or 0],
            "must be <= the row's input_len (the prefix is part of the prompt)",
        )
    return Trace(
        input_lens=ins,
        output_lens=[int(x) for x in cols["output_len"]],
        arrivals_s=[float(x) for x in cols["arrival_s"]] if "arrival_s" in cols else None,
        prefix_ids=[int(x) for x in cols["prefix_id"]] if "prefix_id" in cols else None,
        prefix_lens=[int(x) for x in cols["prefix_len"]] if "prefix_len" in cols else None,
    )


@dataclass(frozen=True, kw_only=True)
class RequestOptions:
    """The requests of a ``bench_serve`` run: how many, when they are sent, and their lengths (random, a
    shipped distribution, or a trace); each keyword is its ``vllm bench serve`` flag."""

    num_prompts: int = opt(
        1000,
        "requests sent (--num-prompts)",
        flag=Flag(names=("--num-prompts",), help=f"requests [1000, <= {MAX_BENCH_PROMPTS}]", value_type="prompts"),
    )
    request_rate: float = opt(
        math.inf,
        "requests per s (inf: all at t = 0)",
        flag=Flag(names=("--request-rate",), help="requests/s, or inf (all at t=0) [inf]", value_type="request_rate"),
    )
    burstiness: float = opt(
        1.0,
        "gamma shape of the gaps between sends (1: Poisson)",
        flag=Flag(
            names=("--burstiness",), help="gamma shape of inter-arrival gaps (1: Poisson)", value_type="burstiness"
        ),
    )
    input_length: int = opt(
        1024,
        "random prompts: tokens each (--random-input-len)",
        flag=Flag(names=("--random-input-len",), help="prompt tokens [1024]", value_type="tokens"),
    )
    output_length: int = opt(
        128,
        "random requests: output tokens each (--random-output-len)",
        flag=Flag(names=("--random-output-len",), help="output tokens [128]", value_type="tokens"),
    )
    range_ratio: float = opt(
        0.0,
        "random lengths uniform within L(1 +- r), r in [0, 1) (--random-range-ratio)",
        flag=Flag(
            names=("--random-range-ratio",),
            help="lengths uniform in L*(1-r)..L*(1+r), 0 <= r < 1 [0]",
            value_type="range_ratio",
        ),
    )
    range_ratio_meaning: str = opt(
        "symmetric",
        "what --random-range-ratio means: symmetric (L(1 +- r), vllm bench serve) or lower-bound (rL..L, SGLang "
        "bench_serving and older vLLM benchmark_serving.py)",
        flag=Flag(
            names=("--random-range-ratio-meaning",),
            help="symmetric: lengths uniform in L*(1-r)..L*(1+r), as vllm bench serve draws them; lower-bound: "
            "uniform in r*L..L, as SGLang's bench_serving and vLLM's older benchmark_serving.py drew them "
            "[symmetric]",
            choices=RANGE_MEANINGS,
        ),
    )
    prefix_length: int = opt(
        0,
        "random prompts: tokens of one prefix every prompt starts with (--random-prefix-len)",
        flag=Flag(
            names=("--random-prefix-len",),
            help="tokens of one prefix every random prompt starts with, before its --random-input-len own tokens "
            "(as vllm bench serve): the prefix cache serves it [0]",
            value_type="prefix_tokens",
        ),
    )
    multiturn_turns: int | None = opt(
        None,
        "dataset_name multiturn: turns per conversation (None: 2)",
        flag=Flag(
            names=("--multiturn-turns",),
            help="turns per conversation of --dataset-name multiturn [2: LMSYS-Chat-1M's mean, arXiv 2309.11998]",
            value_type="turns",
        ),
    )
    dataset_name: str = opt(
        "random",
        "random, multiturn, custom (with dataset_path) or a shipped distribution",
        flag=Flag(
            names=("--dataset-name",),
            help="random (the --random-* lengths), multiturn (conversations: each turn's prompt is the history + a "
            "new --random-input-len message) or a shipped length distribution: sharegpt, arxiv_summarization, "
            "azure_conv_2023, ... (`simcast workloads` lists them) [random]",
        ),
    )
    dataset_path: str | None = opt(
        None,
        "a .jsonl or .csv trace of token counts (optionally send times, prefixes)",
        flag=Flag(
            names=("--dataset-path", "--dataset"),
            help="your trace, .jsonl or .csv: input_len,output_len (or num_prefill_tokens,num_decode_tokens or "
            "ContextTokens,GeneratedTokens), optional arrival_s (or arrived_at) and optional prefix_id,prefix_len "
            "(a shared prefix, for the prefix cache): replayed when it has arrival times, else its first "
            "--num-prompts rows at --request-rate",
        ),
    )
    sharegpt_output_len: int | None = opt(
        None,
        "a dataset's output tokens, each (None: the dataset's own)",
        flag=Flag(
            names=("--sharegpt-output-len",),
            help="output tokens of every request of a dataset (not random), as vLLM's flag; with sharegpt, prompts "
            "whose prompt + output exceeds 2048 are dropped as vLLM drops them",
            value_type="tokens",
        ),
    )
    seed: int = opt(
        0,
        "seed of the random lengths and send times",
        flag=Flag(names=("--seed",), help="random seed [0]", value_type="seed"),
    )


Built = tuple[list["RequestSpec"], str, str]
"""A run's requests, the label of where their lengths came from, and the assumption line stating it."""


def _trace_requests(o: RequestOptions, path: str) -> Built:
    """A ``--dataset-path`` trace: its rows replayed at their send times, or their lengths sent at the rate."""
    from simcast.serving.request_level.simulate import RequestSpec, requests_from_lengths

    name, olen, num_prompts = o.dataset_name, o.sharegpt_output_len, o.num_prompts
    require(
        name in ("random", "custom"),
        "--dataset-path",
        path,
        f"is a trace of your own; drop --dataset-name {name} (shipped distributions need no file) "
        "or use --dataset-name custom",
    )
    t = read_trace(path)
    outs = t.output_lens if olen is None else [olen] * len(t.output_lens)
    pids = t.prefix_ids or [-1] * len(outs)
    plens = t.prefix_lens or [0] * len(outs)
    if t.arrivals_s is not None:
        reqs = [
            RequestSpec(arrival_s=x, input_len=i, output_len=out, prefix_id=p, prefix_len=n)
            for x, i, out, p, n in zip(t.arrivals_s, t.input_lens, outs, pids, plens)
        ]
        return reqs, f"trace {Path(path).name}", "request lengths and send times: replayed from the trace"
    reqs = requests_from_lengths(
        t.input_lens,
        outs,
        num_prompts=num_prompts,
        rate=o.request_rate,
        burstiness=o.burstiness,
        seed=o.seed,
        prefix_ids=pids,
        prefix_lens=plens,
    )
    note = (
        f"request lengths: the trace's first {min(num_prompts, len(t.input_lens))} rows in file order"
        + (", the rest drawn from its rows with replacement" if num_prompts > len(t.input_lens) else "")
        + "; send times: gamma gaps at --request-rate"
    )
    return reqs, f"trace {Path(path).name}", note


def _multiturn_requests(o: RequestOptions) -> Built:
    """``--dataset-name multiturn``: conversations whose turns are sent as the previous answers arrive."""
    from simcast.serving.request_level.simulate import make_conversations

    olen, num_prompts = o.sharegpt_output_len, o.num_prompts
    require(olen is None, "--sharegpt-output-len", olen, "multiturn uses --random-output-len per answer")
    turns = o.multiturn_turns or 2
    reqs = make_conversations(
        num_prompts=num_prompts,
        rate=o.request_rate,
        turns=turns,
        input_len=o.input_length,
        output_len=o.output_length,
        range_ratio=o.range_ratio,
        burstiness=o.burstiness,
        seed=o.seed,
    )
    note = (
        f"multi-turn: {-(-num_prompts // turns)} conversations of {turns} turns; each turn's prompt is the "
        f"whole history + a new message of --random-input-len {o.input_length} tokens, answers "
        f"--random-output-len {o.output_length} (range ratio {o.range_ratio:g}); a turn is sent when "
        "the previous answer arrives (closed loop, no think time); conversation starts at --request-rate"
    )
    return reqs, f"multiturn ({turns} turns)", note


def _random_requests(o: RequestOptions) -> Built:
    """``--dataset-name random``: lengths uniform within L(1 +- r), optionally after one shared prefix."""
    from simcast.serving.request_level.simulate import make_requests

    olen = o.sharegpt_output_len
    require(
        olen is None,
        "--sharegpt-output-len",
        olen,
        "applies to a dataset (--dataset-name sharegpt, ... or --dataset-path); random uses --random-output-len",
    )
    reqs = make_requests(
        num_prompts=o.num_prompts,
        rate=o.request_rate,
        input_len=o.input_length,
        output_len=o.output_length,
        range_ratio=o.range_ratio,
        burstiness=o.burstiness,
        seed=o.seed,
        prefix_len=o.prefix_length,
        range_meaning=o.range_ratio_meaning,
    )
    if o.prefix_length:
        return (
            reqs,
            "random",
            (
                f"random prompts: the same {o.prefix_length}-token prefix, then --random-input-len "
                f"{o.input_length} own tokens (vllm bench serve --random-prefix-len)"
            ),
        )
    if o.range_ratio_meaning == "lower-bound":
        r = o.range_ratio
        return reqs, "random", f"random lengths uniform in {r:g}L..L (--random-range-ratio-meaning lower-bound)"
    return reqs, "random", ""


def _dataset_requests(o: RequestOptions) -> Built:
    """A shipped length distribution (``--dataset-name sharegpt``, ...): lengths drawn i.i.d."""
    from simcast.inputs.workloads import load_distribution
    from simcast.serving.request_level.simulate import make_requests

    name, olen, seed = o.dataset_name, o.sharegpt_output_len, o.seed
    dist = load_distribution(name)
    if olen is not None:
        dist = dist.with_output_tokens(olen)
    reqs = make_requests(
        num_prompts=o.num_prompts, rate=o.request_rate, burstiness=o.burstiness, seed=seed, lengths=dist
    )
    label = f"dataset {name}" + (f" (output {olen})" if olen is not None else "")
    approx = dist.provenance.get("approximation")
    note = (
        f"request lengths: drawn i.i.d. (seed {seed}) from the shipped {name} distribution "
        + (
            f"({approx}; docs/workloads.md)"
            if approx
            else f"({len(dist.weights)} histogram cells of {dist.provenance.get('rows')} source rows, "
            f"{dist.provenance.get('tokenizer')} tokens; docs/workloads.md)"
        )
        + (f", output set to {olen} tokens" if olen is not None else "")
    )
    return reqs, label, note


def build_requests(o: RequestOptions) -> Built:
    """The run's requests from the options, a short label of where their lengths came from
    (``random`` for the random dataset) and the assumption line that states it ("" for random)."""
    name, path = o.dataset_name, o.dataset_path
    require(
        not o.prefix_length or (name == "random" and not path),
        "--random-prefix-len",
        o.prefix_length,
        "applies to --dataset-name random (a trace names its prefixes in prefix_id,prefix_len columns)",
    )
    require(
        o.multiturn_turns is None or name == "multiturn",
        "--multiturn-turns",
        o.multiturn_turns,
        "applies to --dataset-name multiturn",
    )
    if path:
        return _trace_requests(o, path)
    require(name != "custom", "--dataset-name", name, "custom needs --dataset-path FILE")
    if name == "multiturn":
        return _multiturn_requests(o)
    if name == "random":
        return _random_requests(o)
    return _dataset_requests(o)

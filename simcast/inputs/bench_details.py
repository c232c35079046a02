"""Per-request arrays of a serving benchmark result and SGLang's JSON lines (edge module, for
:mod:`simcast.inputs.bench_results`).

Per-request arrays (``vllm bench serve --save-result --save-detailed``, ``sglang.bench_serving
--output-details``; the same names in both, one entry per request sent, failures included):
``input_lens`` (prompt tokens), ``output_lens`` (output tokens; 0 for a failed request), ``ttfts`` (s) and
``itls`` (a list of inter-token gaps per request, s). A request counts when its output length is >= 1 and
its ``errors`` entry (when present) is empty, as both tools count ``completed``.

SGLang's ``python -m sglang.bench_serving --output-file F`` appends one JSON object per run to ``F``
(keys as ``python/sglang/bench_serving.py`` writes them, sgl-project/sglang@0033168f0f58b2bc05aa0273bd475d9c01bafb1c,
``benchmark()``'s ``result`` dict: ``backend``, ``request_rate`` — ``json.dumps`` of ``float("inf")`` is the
bare constant ``Infinity`` —, ``max_concurrency``, ``random_range_ratio``, ``completed``,
``total_input_tokens``, ``total_output_tokens``, ``output_throughput``, ``mean_ttft_ms``, ``mean_tpot_ms``,
...; no ``num_prompts`` and no ``burstiness``: its arrivals are Poisson, ``np.random.exponential``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from simcast.core.errors import require
from simcast.inputs.files import loads_json
from simcast.inputs.limits import MAX_TOKENS

MAX_ITL_S = 1e6
"""Longest inter-token gap or TTFT read from a per-request array, s."""
_INF_RATE = re.compile(r'("request_rate"\s*:\s*)(-?)Infinity\b')


@dataclass(frozen=True, kw_only=True)
class RequestDetails:
    """What the per-request arrays say about the completed requests (seconds, tokens)."""

    lens: tuple[tuple[int, int], ...]  # (input, output) tokens of each completed request, in order sent
    mean_ttft_s: float | None  # over completed requests; None without ``ttfts``
    mean_tpot_s: float | None  # sum(itl) / (output - 1) over requests with 2+ outputs; None without ``itls``


def json_documents(text: str, where: str, *, lines: bool) -> list[dict[str, Any]]:
    """The JSON objects of a result file: one document, or one per non-empty line (``lines``: a ``.jsonl``
    file, or a ``.json`` file that holds several lines of objects, as SGLang's ``--output-file`` appends)."""
    text = _INF_RATE.sub(lambda m: m.group(1) + '"inf"' if not m.group(2) else m.group(0), text)
    rows = [ln for ln in text.splitlines() if ln.strip()]
    several = len(rows) > 1 and all(ln.lstrip().startswith("{") and ln.rstrip().endswith("}") for ln in rows)
    if not (lines or several):
        return [loads_json(text, where)]
    require(bool(rows), where, None, "holds no JSON line")
    return [loads_json(ln, f"{where} line {k + 1}") for k, ln in enumerate(text.splitlines()) if ln.strip()]


def _array(doc: dict[str, Any], key: str, where: str, n: int | None) -> list[Any] | None:
    v = doc.get(key)
    if v is None:
        return None
    require(isinstance(v, list), f"{where}: {key}", type(v).__name__, "must be a list (one entry per request)")
    require(n is None or len(v) == n, f"{where}: {key}", len(v), f"entries; input_lens has {n}")
    return v


def _num(x: Any, where: str, hi: float) -> float:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= hi
    require(ok, where, x, f"must be a number in [0, {hi:g}]")
    return float(x)


def request_details(doc: dict[str, Any], where: str) -> RequestDetails | None:
    """The per-request arrays of ``doc`` (module docstring), or None when it has no ``input_lens`` and
    ``output_lens``; bad entries: one line naming the key and index."""
    ins = _array(doc, "input_lens", where, None)
    outs = _array(doc, "output_lens", where, len(ins) if ins is not None else None)
    if ins is None or outs is None:
        return None
    n = len(ins)
    ttfts = _array(doc, "ttfts", where, n)
    itls = _array(doc, "itls", where, n)
    errors = _array(doc, "errors", where, n)
    keep, ttft_sum, tpots = [], 0.0, []
    for k in range(n):
        i = int(_num(ins[k], f"{where}: input_lens[{k}]", MAX_TOKENS))
        o = int(_num(outs[k], f"{where}: output_lens[{k}]", MAX_TOKENS))
        if o < 1 or i < 1 or (errors is not None and errors[k]):
            continue  # a failed request: not in the tools' ``completed`` either
        keep.append((i, o))
        if ttfts is not None:
            ttft_sum += _num(ttfts[k], f"{where}: ttfts[{k}]", MAX_ITL_S)
        if itls is not None and o > 1:
            gaps = itls[k]
            require(isinstance(gaps, list), f"{where}: itls[{k}]", gaps, "must be a list of gaps (s)")
            tot = sum(_num(g, f"{where}: itls[{k}][{j}]", MAX_ITL_S) for j, g in enumerate(gaps))
            tpots.append(tot / (o - 1))
    require(bool(keep), f"{where}: output_lens", None, "no request completed (every output length is 0)")
    return RequestDetails(
        lens=tuple(keep),
        mean_ttft_s=ttft_sum / len(keep) if ttfts is not None else None,
        mean_tpot_s=sum(tpots) / len(tpots) if itls is not None and tpots else None,
    )

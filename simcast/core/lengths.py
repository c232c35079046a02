"""A distribution of request lengths: (prompt tokens, output tokens) pairs with weights (pure; no I/O).

A benchmark dataset (ShareGPT, a production trace, ...) enters simcast as a
:class:`LengthDistribution`: a finite set of support points, each a pair of whole
token counts with a probability. The shipped ones (``simcast/data/workloads``,
read by :mod:`simcast.inputs.workloads`) are joint histograms whose points are the
cells' mean lengths, so the expectations below are the source's own means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcast.core.errors import require

RANGE_MEANINGS = ("symmetric", "lower-bound")
"""``--random-range-ratio`` meanings: ``symmetric`` (``vllm bench serve``: L(1-r)..L(1+r)) and ``lower-bound``
(SGLang ``bench_serving`` and older vLLM ``benchmark_serving.py``: rL..L)."""


def length_range(length: int, r: float, meaning: str) -> tuple[int, int]:
    """The half-open integer range ``[lo, hi)`` one random length is drawn from (``r``: the range ratio)."""
    if meaning == "lower-bound":
        return max(1, int(length * r)), length + 1
    return max(1, math.floor(length * (1 - r))), math.ceil(length * (1 + r)) + 1


@dataclass(frozen=True, kw_only=True)
class LengthDistribution:
    """Weighted (input tokens, output tokens) pairs.

    ``weights`` (>= 0, any positive sum; normalised on use), ``input_tokens`` and
    ``output_tokens`` (whole numbers >= 1) are parallel tuples. ``provenance``
    records where the pairs came from (free-form strings and numbers, for display).
    ``max_total_tokens`` (0: none) is the source's own cap on prompt + output, which
    :meth:`with_output_tokens` re-applies, as ``vllm bench serve`` re-filters ShareGPT
    with ``--sharegpt-output-len``.
    """

    name: str
    weights: tuple[float, ...]
    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)
    max_total_tokens: int = 0

    def __post_init__(self) -> None:
        n = len(self.weights)
        require(n > 0, f"length distribution {self.name}", n, "needs at least one (input, output) pair")
        require(
            len(self.input_tokens) == n and len(self.output_tokens) == n,
            f"length distribution {self.name}",
            (len(self.input_tokens), len(self.output_tokens)),
            f"input and output lengths must number {n}, one per weight",
        )
        w = np.asarray(self.weights, dtype=float)
        require(
            bool(np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0),
            f"length distribution {self.name}: weights",
            self.weights[:4],
            "must be finite, >= 0 and not all 0",
        )
        for what, xs in (("input", self.input_tokens), ("output", self.output_tokens)):
            require(
                all(isinstance(x, int) and x >= 1 for x in xs),
                f"length distribution {self.name}: {what} tokens",
                next((x for x in xs if not (isinstance(x, int) and x >= 1)), None),
                "must be whole numbers >= 1",
            )
        require(self.max_total_tokens >= 0, f"length distribution {self.name}", self.max_total_tokens, "must be >= 0")

    # ------------------------------------------------------------------ expectations
    def support(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(probabilities, input_tokens, output_tokens)``: float64 summing to 1 and two int64 arrays, one
        entry per support point (for expectations: ``E[f(isl, osl)] = sum(p * f(i, o))``)."""
        w = np.asarray(self.weights, dtype=float)
        return (
            w / w.sum(),
            np.asarray(self.input_tokens, dtype=np.int64),
            np.asarray(self.output_tokens, dtype=np.int64),
        )

    @property
    def mean_input_tokens(self) -> float:
        """E[prompt tokens]."""
        p, i, _ = self.support()
        return float(p @ i)

    @property
    def mean_output_tokens(self) -> float:
        """E[output tokens]."""
        p, _, o = self.support()
        return float(p @ o)

    @property
    def mean_total_tokens(self) -> float:
        """E[prompt + output tokens] (the KV tokens a request holds at its end)."""
        return self.mean_input_tokens + self.mean_output_tokens

    def quantile(self, q: float, of: str = "input") -> int:
        """The smallest support value ``x`` of ``of`` (``input``, ``output`` or ``total`` tokens) with
        ``P(X <= x) >= q``, for ``q`` in [0, 1] (the lower quantile of the discrete distribution)."""
        require(0.0 <= q <= 1.0, "quantile", q, "must be in [0, 1]")
        p, i, o = self.support()
        x = {"input": i, "output": o, "total": i + o}.get(of)
        require(x is not None, "quantile of", of, "must be input, output or total")
        assert x is not None
        order = np.argsort(x, kind="stable")
        cdf = np.cumsum(p[order])
        k = int(np.searchsorted(cdf, q - 1e-12, side="left"))
        return int(x[order][min(k, len(order) - 1)])

    # ------------------------------------------------------------------ sampling
    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` independent (input, output) draws as two int64 arrays; deterministic given ``rng``'s state."""
        require(n >= 0, "samples", n, "must be >= 0")
        p, i, o = self.support()
        k = rng.choice(len(p), size=n, p=p)
        return i[k], o[k]

    def with_output_tokens(self, output_tokens: int) -> LengthDistribution:
        """Every request's output set to ``output_tokens`` (vLLM's ``--sharegpt-output-len``); points whose
        prompt + output then exceeds ``max_total_tokens`` are dropped, as vLLM's filter drops them."""
        require(output_tokens >= 1, "--sharegpt-output-len", output_tokens, "must be >= 1")
        cap = self.max_total_tokens
        keep = [k for k, i in enumerate(self.input_tokens) if not cap or i + output_tokens <= cap]
        require(
            bool(keep),
            "--sharegpt-output-len",
            output_tokens,
            f"leaves no prompt of {self.name} within its {cap}-token limit on prompt + output",
        )
        return LengthDistribution(
            name=self.name,
            weights=tuple(self.weights[k] for k in keep),
            input_tokens=tuple(self.input_tokens[k] for k in keep),
            output_tokens=(output_tokens,) * len(keep),
            provenance={**self.provenance, "output_tokens_override": output_tokens},
            max_total_tokens=cap,
        )

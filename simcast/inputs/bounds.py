"""Each bounded kind of user input, declared once: its range, whether the ends are included, and what it
counts. The CLI's argparse types (``simcast/cli/args.py`` ``VALUE_TYPES``) and the API's checks
(:func:`simcast.api.common.check_options`) are both made from :data:`BOUNDS`, so a flag and the keyword
of the same field accept the same values. An options field names its kind in its flag's ``value_type``.

The numbers and their reasons are :mod:`simcast.inputs.limits`'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcast.inputs import limits

MAX_REQUEST_RATE = 1e9
"""Requests/s, the most any rate flag or keyword takes (``--request-rate``): 10^9 arrivals a second is far
beyond any server, and keeps inter-arrival times above float resolution."""
MIN_REQUEST_RATE = 1e-6
"""Requests/s, the least a replay's arrival rate takes (one request in 11.6 days)."""


@dataclass(frozen=True, kw_only=True)
class Bound:
    """A range of one kind of input: ``lo``..``hi``, ``lo`` excluded when ``lo_open`` and ``hi`` when
    ``hi_open``; whole numbers only when ``integer``; +inf also allowed when ``inf_ok``; ``what`` says in
    the CLI's error what the number counts (its unit)."""

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    inf_ok: bool = False
    what: str = ""

    def ok(self, value: object) -> bool:
        """``value`` is a number of this kind within the range (a bool is not a number)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if self.inf_ok and value == math.inf:
            return True
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return math.isfinite(value) and above and below

    def allowed(self) -> str:
        """The range in the words of a :class:`~simcast.core.errors.SimcastInputError` (the API's)."""
        if self.integer:
            return f"must be an integer in {self.lo:g}..{self.hi:g}"
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"must be a number in {left}{self.lo:g}, {self.hi:g}{right}" + (" or inf" if self.inf_ok else "")


def _count(lo: int, hi: int, what: str = "") -> Bound:
    return Bound(lo=lo, hi=hi, integer=True, what=what)


def _positive(hi: float, what: str = "") -> Bound:
    return Bound(lo=0.0, hi=hi, lo_open=True, what=what)


BOUNDS: dict[str, Bound] = {
    "requests": _count(1, limits.MAX_REQUESTS, "requests per step"),
    "tokens": _count(1, limits.MAX_TOKENS, "tokens per request"),
    "prefix_tokens": _count(0, limits.MAX_TOKENS, "tokens per request"),
    "batched_tokens": _count(1, limits.MAX_BATCHED_TOKENS, "tokens per step"),
    "microbatches": _count(1, limits.MAX_MICROBATCHES),
    "devices": _count(1, limits.MAX_DEVICES, "devices"),
    "devices_per_node": _count(1, limits.MAX_DEVICES_PER_NODE),
    "prompts": _count(1, limits.MAX_BENCH_PROMPTS, "requests simulated"),
    "turns": _count(1, 1000, "turns per conversation"),
    "warmups": _count(0, limits.MAX_BENCH_PROMPTS, "warm-up requests"),
    "seed": _count(0, 2**32 - 1),
    "spec_tokens": _count(1, limits.MAX_SPEC_TOKENS, "speculative tokens per step"),
    "draft_tokens": _count(2, limits.MAX_SPEC_TOKENS + 1, "tokens verified per step"),
    "experts": _count(0, 65536, "redundant expert replicas"),
    "gemm_dim": _count(1, limits.MAX_GEMM_DIM, "cuBLAS takes 32-bit dimensions"),
    "heads": _count(1, limits.MAX_HEADS),
    "head_dim": _count(1, limits.MAX_HEAD_DIM),
    "workers": _count(1, limits.MAX_WORKERS, "worker processes"),
    "refine_top": _count(1, limits.MAX_REFINE_TOP, "layouts"),
    "refine_prompts": _count(1, limits.MAX_BENCH_PROMPTS, "requests per run"),
    "replay_top": _count(0, limits.MAX_REFINE_TOP, "deployments"),
    "user_rate": _positive(1e6, "output token/s per user"),
    "count": _count(1, 2**63 - 1),
    "limit_ms": Bound(lo=0.0, hi=limits.MAX_LIMIT_MS, what="milliseconds; 0: no limit"),
    "fraction": _positive(1.0, "a fraction of GPU memory"),
    "message_bytes": _positive(limits.MAX_MESSAGE_BYTES, "1 PiB"),
    "search_rate": _positive(MAX_REQUEST_RATE, "requests/s"),
    "finite_rate": Bound(lo=MIN_REQUEST_RATE, hi=MAX_REQUEST_RATE, lo_open=True, what="requests/s"),
    "request_rate": Bound(lo=MIN_REQUEST_RATE, hi=MAX_REQUEST_RATE, inf_ok=True),
    "imbalance": Bound(lo=1.0, hi=1000.0, what="busiest expert rank's load over the uniform-routing expectation"),
    "smooth_factor": Bound(lo=0.0, hi=1.0, what="SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR"),
    "burstiness": Bound(lo=1e-3, hi=1e3, what="gamma shape"),
    "range_ratio": Bound(lo=0.0, hi=1.0, hi_open=True),
}
"""Every bounded kind of input by name (an options field's ``Flag.value_type``)."""

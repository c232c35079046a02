"""argparse value types shared by every subcommand (one-line messages, exit code 2).

Every size has an upper bound from :mod:`simcast.inputs.limits`, so no flag can make a run take
minutes or exhaust memory; the bound is in the message and in ``--help``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from simcast.core.errors import bounded_repr
from simcast.inputs import limits
from simcast.inputs.bounds import BOUNDS, Bound


def parse_int(v: str) -> int | None:
    """``v`` as an int when it is ASCII digits (an optional sign, ``_`` separators), else None.

    ``str.isdigit`` accepts ``²`` and ``int`` accepts Arabic-Indic digits: neither is a size.
    """
    s = v.strip()
    if not s.isascii() or len(s) > 30:
        return None
    try:
        return int(s)
    except ValueError:
        return None


def int_in(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """An argparse type: an integer in ``[lo, hi]`` (``what`` says what the bound means)."""

    def parse(v: str) -> int:
        n = parse_int(v)
        kind = "a positive integer" if lo == 1 else f"an integer >= {lo}"
        if n is None:
            raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be {kind}")
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(
                f"got {n if n.bit_length() < 128 else bounded_repr(v)}; must be {kind} "
                f"<= {hi}" + (f" ({what})" if what else "")
            )
        return n

    parse.__name__ = "integer"
    return parse


def float_in(lo: float, hi: float, what: str = "", *, lo_open: bool = True) -> Callable[[str], float]:
    """An argparse type: a finite number in ``(lo, hi]`` (``[lo, hi]`` unless ``lo_open``)."""

    def parse(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be a positive number") from None
        if not (math.isfinite(x) and (lo < x if lo_open else lo <= x) and x <= hi):
            bound = f" and <= {hi:g}" if math.isfinite(hi) else ""
            above = ">" if lo_open else ">="
            raise argparse.ArgumentTypeError(
                f"got {bounded_repr(v)}; must be a finite number {above} {lo:g}{bound}" + (f" ({what})" if what else "")
            )
        return x

    parse.__name__ = "number"
    return parse


def bounded(b: Bound) -> Callable[[str], Any]:
    """The argparse type of the bounded kind ``b`` (:data:`simcast.inputs.bounds.BOUNDS`)."""
    if b.integer:
        return int_in(int(b.lo), int(b.hi), b.what)
    return float_in(b.lo, b.hi, b.what, lo_open=b.lo_open)


def request_rate(v: str) -> float:
    """A request rate in requests/s: a finite number in [1e-6, 1e9], or inf (every request at t = 0)."""
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    b = BOUNDS["request_rate"]
    if not b.ok(x):
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be a number in [{b.lo:g}, {b.hi:g}] or inf")
    return x


def range_ratio(v: str) -> float:
    """A length range ratio r in [0, 1): lengths uniform in L*(1-r)..L*(1+r)."""
    x = float_in(-1.0, 1.0)(v)
    if not BOUNDS["range_ratio"].ok(x):
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be in [0, 1)")
    return x


def hit_rate(v: str) -> float:
    """``--prefix-hit-rate``: a share in [0, 1) (one prompt token is always computed)."""
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not limits.prefix_hit_rate_ok(x):
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; {limits.PREFIX_HIT_RATE_RANGE}")
    return x


def a_number(v: str) -> float:
    """Any number (its range is checked once, after parsing, where every source of it is: the inter-node
    bandwidth and latency by :func:`simcast.inputs.limits.check_fabric_choice`, in its one-line form)."""
    try:
        return float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be a number") from None


KV_DTYPE_SPELLINGS = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bfloat16": "bf16"}
"""The engines' other spellings of a KV cache dtype (vLLM and SGLang ``fp8_e4m3`` / ``fp8_e5m2``: one byte per
element, as simcast's ``fp8``; ``bfloat16``)."""


def kv_cache_dtype(v: str) -> str:
    """``--kv-cache-dtype`` as simcast names it (the choices check follows)."""
    return KV_DTYPE_SPELLINGS.get(v.strip().lower(), v)


VALUE_TYPES: dict[str, Callable[[str], Any]] = {
    **{name: bounded(b) for name, b in BOUNDS.items()},
    "request_rate": request_rate,
    "range_ratio": range_ratio,
    "kv_cache_dtype": kv_cache_dtype,
    "hit_rate": hit_rate,
    "link_gbps": a_number,
    "latency_us": a_number,
}
"""The bounded argparse types an options field's :class:`simcast.api.options.Flag` names (``value_type``):
one per kind of :data:`~simcast.inputs.bounds.BOUNDS`, and the kinds with their own wording."""

# The bounded flag types the hand-written parsers (engine flags) name.
REQUESTS = VALUE_TYPES["requests"]
TOKENS = VALUE_TYPES["tokens"]
BATCHED_TOKENS = VALUE_TYPES["batched_tokens"]
MICROBATCHES = VALUE_TYPES["microbatches"]
DEVICES = VALUE_TYPES["devices"]
DEVICES_PER_NODE = VALUE_TYPES["devices_per_node"]
GEMM_DIM = VALUE_TYPES["gemm_dim"]
HEADS = VALUE_TYPES["heads"]
HEAD_DIM = VALUE_TYPES["head_dim"]
MESSAGE_BYTES = VALUE_TYPES["message_bytes"]
LIMIT_MS = VALUE_TYPES["limit_ms"]
FRACTION = VALUE_TYPES["fraction"]
IMBALANCE = VALUE_TYPES["imbalance"]


def resolve_partition_arg(partition: str | None, engine: str | None) -> str:
    """The partition a command uses: the flag's value (canonical form), else the engine's default rule."""
    from simcast.engines.partition import canonical_partition, default_partition

    return canonical_partition(partition) if partition else default_partition(engine)

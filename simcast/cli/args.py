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


def float_in(lo: float, hi: float, what: str = "") -> Callable[[str], float]:
    """An argparse type: a finite number in ``(lo, hi]``."""

    def parse(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be a positive number") from None
        if not (math.isfinite(x) and lo < x <= hi):
            bound = f" and <= {hi:g}" if math.isfinite(hi) else ""
            raise argparse.ArgumentTypeError(
                f"got {bounded_repr(v)}; must be a finite number > {lo:g}{bound}" + (f" ({what})" if what else "")
            )
        return x

    parse.__name__ = "number"
    return parse


def positive_int(v: str) -> int:
    """An integer >= 1 (no upper bound: for counts like ``--top`` that allocate nothing)."""
    return int_in(1, 2**63 - 1)(v)


# The bounded flag types, one per kind of size (bounds and their reasons: simcast.inputs.limits).
REQUESTS = int_in(1, limits.MAX_REQUESTS, "requests per step")
TOKENS = int_in(1, limits.MAX_TOKENS, "tokens per request")
BATCHED_TOKENS = int_in(1, limits.MAX_BATCHED_TOKENS, "tokens per step")
MICROBATCHES = int_in(1, limits.MAX_MICROBATCHES)
DEVICES = int_in(1, limits.MAX_DEVICES, "devices")
DEVICES_PER_NODE = int_in(1, limits.MAX_DEVICES_PER_NODE)
GEMM_DIM = int_in(1, limits.MAX_GEMM_DIM, "cuBLAS takes 32-bit dimensions")
HEADS = int_in(1, limits.MAX_HEADS)
HEAD_DIM = int_in(1, limits.MAX_HEAD_DIM)
MESSAGE_BYTES = float_in(0.0, limits.MAX_MESSAGE_BYTES, "1 PiB")
LIMIT_MS = float_in(0.0, limits.MAX_LIMIT_MS, "milliseconds")
FRACTION = float_in(0.0, 1.0, "a fraction of GPU memory")
IMBALANCE = float_in(1.0, 1000.0, "busiest expert rank's load over the uniform-routing expectation")
_MAX_RATE = 1e9  # requests/s


def request_rate(v: str) -> float:
    """A request rate in requests/s: a finite number in [1e-6, 1e9], or inf (every request at t = 0)."""
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not (math.isinf(x) and x > 0) and not 1e-6 <= x <= _MAX_RATE:
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be a number in [1e-06, 1e+09] or inf")
    return x


def range_ratio(v: str) -> float:
    """A length range ratio r in [0, 1): lengths uniform in L*(1-r)..L*(1+r)."""
    x = float_in(-1.0, 1.0)(v)
    if not 0 <= x < 1:
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


VALUE_TYPES: dict[str, Callable[[str], Any]] = {
    "requests": REQUESTS,
    "tokens": TOKENS,
    "batched_tokens": BATCHED_TOKENS,
    "microbatches": MICROBATCHES,
    "devices": DEVICES,
    "devices_per_node": DEVICES_PER_NODE,
    "limit_ms": LIMIT_MS,
    "fraction": FRACTION,
    "imbalance": IMBALANCE,
    "smooth_factor": float_in(0.0, 1.0, "SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR"),
    "prompts": int_in(1, limits.MAX_BENCH_PROMPTS, "requests simulated"),
    "request_rate": request_rate,
    "burstiness": float_in(1e-3, 1e3, "gamma shape"),
    "range_ratio": range_ratio,
    "turns": int_in(1, 1000, "turns per conversation"),
    "warmups": int_in(0, limits.MAX_BENCH_PROMPTS, "warm-up requests"),
    "seed": int_in(0, 2**32 - 1),
    "hit_rate": hit_rate,
    "spec_tokens": int_in(1, limits.MAX_SPEC_TOKENS, "speculative tokens per step"),
    "draft_tokens": int_in(2, limits.MAX_SPEC_TOKENS + 1, "tokens verified per step"),
    "experts": int_in(0, 65536, "redundant expert replicas"),
}
"""The bounded argparse types an options field's :class:`simcast.api.options.Flag` names (``value_type``)."""


def add_precision_args(p: argparse.ArgumentParser) -> None:
    """``--quantization`` and ``--kv-cache-dtype``, shared by every command that builds a model."""
    p.add_argument(
        "--quantization",
        choices=("none", "fp8"),
        default="none",
        help="fp8: W8A8 linear layers (fp8 weights, per-tensor scales, 16-bit activations; lm_head stays "
        "16-bit), as vLLM --quantization fp8 and ModelOpt FP8 run [default none: the config's own]",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=("auto", "bf16", "fp8"),
        default="auto",
        help="KV cache element type [default auto: the model dtype]",
    )


def add_fabric_args(p: argparse.ArgumentParser) -> None:
    """``--fabric``, ``--inter-node-bandwidth``, ``--inter-node-latency``: every command that builds a device.

    They replace the profile's inter-node link (:mod:`simcast.core.fabrics`): profile < named fabric <
    explicit bandwidth / latency.
    """
    from simcast.core.fabrics import FABRICS

    p.add_argument(
        "--fabric",
        choices=tuple(FABRICS),
        default=None,
        help="inter-node fabric, one NIC of this rate per GPU (sources: simcast/core/fabrics.py) "
        "[default: the device profile's inter-node link]",
    )
    p.add_argument(
        "--inter-node-bandwidth",
        type=float_in(0.0, limits.MAX_LINK_GBPS, "GB/s"),
        default=None,
        metavar="GBPS",
        help="inter-node bandwidth per GPU per direction, GB/s (a NIC shared by k GPUs: its rate / k); "
        "overrides --fabric's and the profile's",
    )
    p.add_argument(
        "--inter-node-latency",
        type=_latency_us,
        default=None,
        metavar="US",
        help="inter-node message latency, microseconds; overrides --fabric's and the profile's",
    )


def _latency_us(v: str) -> float:
    """A latency in microseconds: a finite number in [0, MAX_LINK_LATENCY_US]."""
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and 0 <= x <= limits.MAX_LINK_LATENCY_US):
        raise argparse.ArgumentTypeError(
            f"got {bounded_repr(v)}; must be a finite number >= 0 and <= {limits.MAX_LINK_LATENCY_US:g} (microseconds)"
        )
    return x


def fabric_choice(a: argparse.Namespace):
    """The :class:`~simcast.core.fabrics.FabricChoice` of parsed fabric flags."""
    from simcast.core.fabrics import FabricChoice

    choice = FabricChoice(fabric=a.fabric, bandwidth_gbps=a.inter_node_bandwidth, latency_us=a.inter_node_latency)
    return limits.check_fabric_choice(choice)  # the physical bounds (the flag's type checks only the sign)


def target_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The :class:`simcast.api.common.TargetOptions` keywords of parsed flags (every one-call command has
    them): the model, the device, precision, fabric, partition and ``--no-cache``."""
    return dict(
        model=a.model,
        device=a.device,
        quantization=a.quantization,
        kv_cache_dtype=a.kv_cache_dtype,
        fabric=fabric_choice(a),
        partition=a.partition,
        use_cache=not a.no_cache,
    )


def add_partition_arg(p: argparse.ArgumentParser, rules: str) -> None:
    """``--partition`` (alias ``--pp-layer-partition``): a named rule or explicit layer counts."""
    p.add_argument(
        "--partition",
        "--pp-layer-partition",
        dest="partition",
        default=None,
        help=f"{rules} | explicit layer counts like 4,6,6,4, also as the engines write them "
        "(VLLM_PP_LAYER_PARTITION=4,6,6,4, SGLANG_PP_LAYER_PARTITION=4,6,6,4) [default: the engine's own "
        "rule: vllm, sglang or trtllm; vllm without an engine]",
    )


def resolve_partition_arg(partition: str | None, engine: str | None) -> str:
    """The partition a command uses: the flag's value (canonical form), else the engine's default rule."""
    from simcast.engines.partition import canonical_partition, default_partition

    return canonical_partition(partition) if partition else default_partition(engine)

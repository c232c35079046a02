"""Piecewise collective fits: NCCL's own protocols and the engines' all-reduce as they issue it.

A fit is ``t = latency_s + factor · bytes / bus_bw`` (:class:`~simcast.core.device.CollectiveFit`,
``factor = 2(n-1)/n`` for all-reduce, ``(n-1)/n`` for all-gather). Several fits of one
collective and group size with ``max_bytes`` form a piecewise-linear curve, each up to its
``max_bytes``:

* an engine's all-reduce (vLLM, SGLang, TensorRT-LLM): a one-shot custom kernel for small
  messages (every rank reads all peers' buffers: lowest latency), a two-shot kernel
  (reduce-scatter + all-gather through NVLink peer memory) above it, and NCCL past the
  engine's size cutoff;
* NCCL's own all-reduce: its low-latency protocols for small messages, then the bandwidth
  protocols (ring / NVLS) whose per-byte cost is lower but fixed cost higher.

The breakpoints are fitted on measured tables (they are not the engines' documented
cutoffs, which change between releases and with CUDA graphs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from simcast.core.device import CollectiveFit


def factor(kind: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: ``2(n-1)/n`` (all-reduce) or ``(n-1)/n`` (all-gather)."""
    return (2.0 if kind == "all_reduce" else 1.0) * (n - 1) / n


def regimes(fits: Iterable[CollectiveFit], kind: str, n: int) -> tuple[CollectiveFit, ...]:
    """The fits of the group size nearest ``n`` (log scale, larger on ties), by increasing ``max_bytes``."""
    cands = [f for f in fits if f.kind == kind]
    if not cands:
        return ()
    size = min({f.gpus for f in cands}, key=lambda g: (abs(math.log(g / n)), -g))
    return tuple(sorted((f for f in cands if f.gpus == size), key=lambda f: f.max_bytes or math.inf))


def regime_for(regs: tuple[CollectiveFit, ...], message_bytes: float) -> CollectiveFit:
    """The first regime whose ``max_bytes`` covers the message (the last one past every bound)."""
    for f in regs:
        if not f.max_bytes or message_bytes <= f.max_bytes:
            return f
    return regs[-1]


def fitted_s(fit: CollectiveFit, kind: str, n: int, message_bytes: float) -> float:
    """``α + factor · bytes / β`` of one regime."""
    return fit.latency_s + factor(kind, n) * message_bytes / fit.bus_bw_bytes_per_s


def piecewise_s(
    fits: Iterable[CollectiveFit], kind: str, n: int, message_bytes: float
) -> tuple[float, CollectiveFit] | None:
    """Time of a collective from piecewise fits, and the regime used; None without a fit.

    Never more than a larger message costs (the padding envelope: a message can always be sent padded):
    each regime is a rising line, so the least time over messages >= ``message_bytes`` is this regime's
    or a later regime's at its first byte, when the fitted lines cross downwards at a breakpoint.
    """
    regs = regimes(fits, kind, n)
    if not regs:
        return None
    f = regime_for(regs, message_bytes)
    best = (fitted_s(f, kind, n, message_bytes), f)
    for prev, nxt in zip(regs, regs[1:]):
        if prev.max_bytes and prev.max_bytes >= message_bytes:
            t = fitted_s(nxt, kind, n, prev.max_bytes)
            if t < best[0]:
                best = (t, nxt)
    return best


def piecewise_array_s(regs: tuple[CollectiveFit, ...], kind: str, n, message_bytes):
    """Vectorised :func:`piecewise_s` over messages of one group size (the fit evaluates it so)."""
    import numpy as np

    b = np.asarray(message_bytes, dtype=float)
    out = np.empty_like(b)
    done = np.zeros(b.shape, dtype=bool)
    fac = factor(kind, int(n))
    for f in regs:
        sel = ~done & ((b <= f.max_bytes) if f.max_bytes else np.ones(b.shape, dtype=bool))
        out[sel] = f.latency_s + fac * b[sel] / f.bus_bw_bytes_per_s
        done |= sel
    last = regs[-1]
    out[~done] = last.latency_s + fac * b[~done] / last.bus_bw_bytes_per_s
    return out

"""The two curve shapes the kernel formulas share: a saturation and a smooth maximum (array-friendly)."""

from __future__ import annotations

import numpy as np


def saturation(x, half: float):
    """``x / (x + half)``: the fraction of its peak a kernel reaches at size ``x``, half of it at ``x = half``;
    1 when the curve is disabled (``half <= 0``). Works on numpy arrays."""
    return x / (x + half) if half > 0 else 1.0


def smooth_max(*terms, p: float):
    """``(Σ t^p)^(1/p)``, computed relative to the largest term (no overflow for large ``p``)."""
    big = np.maximum.reduce([np.asarray(t, dtype=float) for t in terms])
    safe = np.where(big > 0, big, 1.0)
    return big * sum((np.asarray(t, dtype=float) / safe) ** p for t in terms) ** (1.0 / p)


def l2_multiple(nbytes, boost: float, half_bytes: float, edge: float = 0.0):
    """The bandwidth multiple of a working set of ``nbytes`` partly served from L2 (1 when ``boost`` or
    ``half_bytes`` is 0): the smooth form ``1 + boost · L / (L + bytes)``; with ``edge`` > 0 the capacity form
    ``1 / (hit / (1 + boost) + 1 - hit)``, ``hit = 1 / (1 + (bytes / L)^edge)`` (``L = half_bytes``): a set that
    fits stays in L2 between calls, one past it is evicted before it is read again. Both fall as ``bytes``
    grows, so the memory time ``bytes / multiple`` rises with it. Works on numpy arrays."""
    if boost <= 0 or half_bytes <= 0:
        return 1.0
    nb = np.asarray(nbytes, dtype=float)
    if edge > 0:
        # 1 / (1 + x^edge) written as 0.5 (1 - tanh(edge · ln x / 2)): no overflow for a steep edge
        hit = 0.5 * (1.0 - np.tanh(0.5 * edge * np.log(np.maximum(nb, 1.0) / half_bytes)))
        return 1.0 / (hit / (1.0 + boost) + 1.0 - hit)
    return 1.0 + boost * half_bytes / (half_bytes + nb)

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

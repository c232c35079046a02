"""argparse value types shared by every subcommand (one-line messages, exit code 2)."""

from __future__ import annotations

import argparse
import math


def positive_int(v: str) -> int:
    """An integer >= 1."""
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {v!r}; must be a positive integer") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"got {n}; must be a positive integer")
    return n


def positive_float(v: str) -> float:
    """A finite number > 0."""
    try:
        x = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {v!r}; must be a positive number") from None
    if not x > 0 or math.isinf(x):
        raise argparse.ArgumentTypeError(f"got {v!r}; must be a positive number")
    return x

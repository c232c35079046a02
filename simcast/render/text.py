"""Text simcast prints: numbers of bounded width, JSON that is strict, markdown tables.

Every printer goes through these (tables format measured numbers with :func:`format_number`; every
JSON writer serialises with :func:`json_text`; the CLI's :func:`simcast.cli.outputs.emit` replaces
control characters with :func:`simcast.core.errors.printable`, beside the error messages' bounding).
Without them one unbounded number would print 300 digits.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports this module at start-up: no pandas import here
    import pandas as pd

NUMBER_DIGITS = 9
"""Integer digits a table cell prints before it switches to scientific notation."""


def format_number(x: float, decimals: int = 1, *, signed: bool = False) -> str:
    """``x`` with ``decimals`` decimals (a sign always with ``signed``), or in ``.3g`` scientific notation when
    its integer part has more than :data:`NUMBER_DIGITS` digits, so a cell is at most ~15 characters
    whatever the value."""
    sign = "+" if signed else ""
    if not math.isfinite(x):
        return f"{x:{sign}}"
    if abs(x) >= 10.0**NUMBER_DIGITS:
        return f"{x:{sign}.3g}"
    return f"{x:{sign}.{decimals}f}"


def strict(doc: Any) -> tuple[Any, int]:
    """``doc`` with every NaN and infinity replaced by ``None`` (JSON ``null``) and numpy scalars as Python
    numbers; returns (the copy, how many values became null). Walks iteratively (no recursion)."""
    nulls = 0

    def leaf(v: Any) -> Any:
        nonlocal nulls
        if hasattr(v, "item") and type(v).__module__ == "numpy":  # a numpy scalar
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            nulls += 1
            return None
        return v

    root: list[Any] = [doc]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, doc)]
    while stack:
        parent, key, v = stack.pop()
        if isinstance(v, dict):
            new: Any = dict(v)
            stack.extend((new, k, x) for k, x in v.items())
        elif isinstance(v, (list, tuple)):
            new = list(v)
            stack.extend((new, i, x) for i, x in enumerate(v))
        else:
            new = leaf(v)
        parent[key] = new
    return root[0], nulls


NULL_REASON_KEY = "null_values"
"""The key a JSON object printed by simcast gains when some of its values are null: why they are."""


def json_text(doc: Any, *, indent: int | None = None, null_reason: str = "", **kw: Any) -> str:
    """Strict JSON (no ``NaN``/``Infinity`` tokens: ``json.dumps(allow_nan=False)``) of ``doc``.

    Non-finite numbers become ``null``; when ``doc`` is an object and any did, it gains
    ``"null_values"``: ``null_reason`` (what a null means where this document is written) or a
    generic one. ``kw`` goes to ``json.dumps`` (``separators``, ``default``).
    """
    clean, nulls = strict(doc)
    if nulls and isinstance(clean, dict):
        clean[NULL_REASON_KEY] = f"{nulls} value(s) are null: " + (
            null_reason or "not defined here (NaN) or not finite (infinite) in simcast's result"
        )
    return json.dumps(clean, indent=indent, allow_nan=False, **kw)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-markdown table; floats with one decimal (:func:`format_number`: bounded width)."""
    cols = list(df.columns)

    def fmt(v: object) -> str:
        return format_number(v) if isinstance(v, float) else ("" if v is None else str(v))

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join(lines)

"""A small schema language for YAML/JSON documents: unknown keys, types and ranges -> one-line errors.

A schema is plain data: a ``dict`` of key -> sub-schema (a key ending in ``?``
is optional), a one-element ``list`` (a list of items of that schema),
:class:`Num` / :class:`Int` / :class:`Str` (bounded scalars), ``"dtype_map"``
(dtype -> positive FLOP/s), ``dict`` (free-form mapping) or a plain type
(``float``, ``int``, ``str``, ``bool``: any finite value of that type). Errors
name the dotted path of the key as the user wrote it (``workload.input_length``),
never a CLI flag. Walks only as deep as the schema, so it never recurses into
user data beyond it (the loaders bound the data's depth anyway).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from simcast.core.dtypes import DTYPE_BYTES, MATMUL_PEAK_DTYPES
from simcast.core.errors import SimcastInputError, printable, require
from simcast.inputs.limits import MAX_FLOPS, MAX_NAME_CHARS, MIN_FLOPS


def _interval(lo: float, hi: float, lo_open: bool, hi_open: bool = False) -> str:
    fmt = lambda v: f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    return f"{'(' if lo_open else '['}{fmt(lo)}, {fmt(hi)}{')' if hi_open else ']'}"


def _number(node: Any, where: str) -> float | int:
    """A finite int or float (YAML 1.1 reads ``989.4e12``, without an exponent sign, as a string)."""
    if isinstance(node, str):
        try:
            node = float(node)
        except ValueError:
            pass
    require(isinstance(node, (int, float)) and not isinstance(node, bool), where, node, "must be a number")
    require(not isinstance(node, float) or math.isfinite(node), where, node, "must be a finite number")
    return node


@dataclass(frozen=True)
class Num:
    """A finite float in ``[lo, hi]`` (``(lo, hi]`` when ``lo_open``)."""

    lo: float
    hi: float
    lo_open: bool = False

    def check(self, node: Any, where: str) -> float:
        x = _number(node, where)  # an int compares exactly with the bounds, however large (no float overflow)
        ok = (x > self.lo if self.lo_open else x >= self.lo) and x <= self.hi
        require(ok, where, node, f"must be in {_interval(self.lo, self.hi, self.lo_open)}")
        return float(x)


@dataclass(frozen=True)
class Int:
    """A whole number in ``[lo, hi]`` (``1.0e+10`` is accepted, ``true`` is not)."""

    lo: int
    hi: int

    def check(self, node: Any, where: str) -> int:
        x = _number(node, where)
        require(isinstance(x, int) or x.is_integer(), where, node, "must be an integer")
        n = int(x)
        require(self.lo <= n <= self.hi, where, node, f"must be an integer in {_interval(self.lo, self.hi, False)}")
        return n


@dataclass(frozen=True)
class Str:
    """A string of 1 to ``max_chars`` characters, none of them a control character (newlines and tabs are
    text; :func:`simcast.core.errors.printable` says which are not)."""

    max_chars: int = MAX_NAME_CHARS

    def check(self, node: Any, where: str) -> str:
        require(isinstance(node, str), where, node, "must be a string")
        require(0 < len(node) <= self.max_chars, where, node, f"must have 1 to {self.max_chars} characters")
        require(
            printable(node) == node,
            where,
            node,
            "must not hold control characters (escape sequences, NUL, bidirectional overrides)",
        )
        return node


def check(node: Any, schema: Any, where: str = "") -> Any:
    """``node`` checked against ``schema`` (see the module docstring); returns the normalised value."""
    if isinstance(schema, (Num, Int, Str)):
        return schema.check(node, where)
    if schema == "dtype_map":
        require(
            isinstance(node, dict) and bool(node), where, node, f"must map dtypes ({', '.join(DTYPE_BYTES)}) to FLOP/s"
        )
        out = {}
        for k, v in node.items():
            require(k in MATMUL_PEAK_DTYPES, f"{where}.{k}", k, f"allowed dtypes: {', '.join(MATMUL_PEAK_DTYPES)}")
            out[k] = Num(MIN_FLOPS, MAX_FLOPS).check(v, f"{where}.{k}")
        return out
    if isinstance(schema, list):  # a list of items of one schema
        require(isinstance(node, list), where, node, "must be a list")
        return [check(item, schema[0], f"{where}[{i}]") for i, item in enumerate(node)]
    if isinstance(schema, dict):
        require(isinstance(node, dict), where or "document", node, "must be a mapping")
        allowed = {k.rstrip("?") for k in schema}
        for k in node:
            require(k in allowed, f"{where}.{k}".lstrip("."), k, f"unknown key; allowed: {', '.join(sorted(allowed))}")
        out = {}
        for k, sub in schema.items():
            key = k.rstrip("?")
            if key not in node:
                require(k.endswith("?"), f"{where}.{key}".lstrip("."), None, "is required")
                continue
            out[key] = check(node[key], sub, f"{where}.{key}".lstrip("."))
        return out
    if schema is dict:
        require(isinstance(node, dict), where, node, "must be a mapping")
        return node
    if schema is float:
        return float(_number(node, where))
    if schema is int:
        return Int(-(2**63), 2**63 - 1).check(node, where)
    if isinstance(schema, type):
        require(isinstance(node, schema), where, node, f"must be a {schema.__name__}")
        return node
    raise SimcastInputError(where, type(schema).__name__, "is not a schema (internal error)")

"""The op IR of a stage trace: tensors with symbolic shapes and the ops that use them.

Importable without torch: the cost model and a cached run only need these records.
Symbolic dims are strings over ``T`` (new tokens), ``R`` (requests) and ``S`` (KV-cache
slots); :func:`shape_fn` turns one into ``f(T, R, S) -> int``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable

from simcast.trace.key import StageKey

@dataclass(frozen=True, kw_only=True)
class TensorArg:
    """A tensor argument: symbolic shape (strings in T, R, S), dtype, stride-0 dims."""

    shape: tuple[str, ...]
    dtype: str
    broadcast_dims: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class OpRecord:
    """One graph node of a stage trace. ``scope``: 'pre', 'layer<i>' or 'post'."""

    op: str
    args: tuple[Any, ...]  # TensorArg | scalar | None
    outputs: tuple[TensorArg, ...]
    scope: str


@dataclass(frozen=True, kw_only=True)
class StageTrace:
    key: StageKey
    ops: tuple[OpRecord, ...]
    compiled: bool  # True when it came from torch.compile in this process


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load,
            ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.USub, ast.Pow)
_SHAPE_FN_CACHE: dict[str, Callable[[int, int, int], int]] = {}


def shape_fn(expr: str) -> Callable[[int, int, int], int]:
    """Compile a symbolic dim like ``"2*T"`` into ``f(T, R, S) -> int`` (whitelisted AST)."""
    fn = _SHAPE_FN_CACHE.get(expr)
    if fn is None:
        tree = ast.parse(expr, mode="eval")
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Name) and node.id not in "TRS"):
                raise ValueError(f"unsupported symbolic dim {expr!r}")
        if expr.isdigit():
            fn = (lambda v: lambda T, R, S: v)(int(expr))
        else:  # the AST was whitelisted above: arithmetic on T, R, S and integer constants only
            fn = eval(f"lambda T, R, S: {expr}", {"__builtins__": {}})
        _SHAPE_FN_CACHE[expr] = fn
    return fn

"""The op IR of a stage trace: tensors with symbolic shapes and the ops that use them.

Importable without torch: the cost model and a cached run only need these records.
Symbolic dims are strings over ``T`` (new tokens), ``R`` (requests) and ``S`` (KV-cache
slots); :func:`shape_fn` turns one into ``f(T, R, S) -> int``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


KNOWN_OPS = frozenset(
    {"linear", "index_select"}
    | {
        f"simcast::{name}"
        for name in (
            "rms_norm",
            "fused_add_rms_norm",
            "rope",
            "silu_and_mul",
            "kv_cache_write",
            "attention",
            "all_reduce",
            "all_gather",
            "dp_comm",
            "vocab_embedding",
            "sample",
            # MoE, MLA, sliding-window and quantised leaf ops (simcast.trace.moe, .mla, .ops, .quant)
            "moe_topk",
            "moe_dispatch",
            "moe_combine",
            "moe_experts",
            "quant_linear",
            "mla_cache_write",
            "mla_attention",
            "attention_sliding",
            "attention_chunked",
            # Gated DeltaNet linear attention (simcast.trace.linear_attention)
            "causal_conv1d",
            "gated_delta_rule",
            "gated_rms_norm",
            "sigmoid_mul",
        )
    }
)
"""Op names a stage trace may hold: the leaf ops of :mod:`simcast.trace.ops` and the two aten ops the
stage modules call. A new leaf op goes here (and gets a row in :data:`simcast.cost.ops.formulas.OP_FORMULAS`); a
cached trace with any other name is not trusted (:mod:`simcast.trace.cache` rebuilds it)."""
KNOWN_DTYPES = frozenset({"fp32", "bf16", "fp16", "fp8", "int64", "int32", "bool"})
"""Tensor dtypes a stage trace may hold (simcast's names for float types, torch's for the rest)."""

MAX_SHAPE_CHARS = 128
"""Longest symbolic dim accepted (the tracer writes names, integers and short sums like ``2*T``)."""
_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Name,
    ast.Constant,
    ast.Load,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.USub,
)
_SHAPE_FN_CACHE: dict[str, Callable[[int, int, int], int]] = {}


def shape_fn(expr: str) -> Callable[[int, int, int], int]:
    """Compile a symbolic dim like ``"2*T"`` into ``f(T, R, S) -> int``.

    Only ``+ - * //``, unary minus, integer constants and the names T, R, S pass the
    whitelist (no ``**``: ``T**T**T`` would never finish), in at most
    :data:`MAX_SHAPE_CHARS` characters; anything else raises ``ValueError``.
    """
    fn = _SHAPE_FN_CACHE.get(expr)
    if fn is None:
        if not isinstance(expr, str) or not 0 < len(expr) <= MAX_SHAPE_CHARS or not expr.isascii():
            raise ValueError(f"unsupported symbolic dim {str(expr)[:MAX_SHAPE_CHARS]!r}")
        try:
            tree = ast.parse(expr, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ValueError(f"unsupported symbolic dim {expr!r}") from None
        for node in ast.walk(tree):
            if (
                not isinstance(node, _ALLOWED)
                or (isinstance(node, ast.Name) and node.id not in ("T", "R", "S"))
                or (isinstance(node, ast.Constant) and (type(node.value) is not int))
            ):
                raise ValueError(f"unsupported symbolic dim {expr!r}")
        if expr.isdigit():
            fn = (lambda v: lambda T, R, S: v)(int(expr))
        else:  # the AST was whitelisted above: arithmetic on T, R, S and integer constants only
            fn = eval(f"lambda T, R, S: {expr}", {"__builtins__": {}})
        _SHAPE_FN_CACHE[expr] = fn
    return fn

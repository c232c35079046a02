"""Trace stage-local modules with ``torch.compile`` on meta tensors.

A recording backend receives dynamo's graph of one stage-local module (never a
full model split afterwards) with symbolic token dims ``T`` (new tokens), ``R``
(requests) and ``S`` (KV-cache slots), and keeps every op with its symbolic
shapes. One compile serves every batch and length; concrete shapes come by
substitution. Traces are cached per :class:`~simcast.trace.stage.StageKey` in memory
and on disk (JSON, keyed by simcast and torch versions), so a warm process or a
repeated run imports no compiler. Pure views (getitem/view/split) cost nothing
and are not kept.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from simcast.trace.key import StageKey

TRACE_FORMAT = 2
_VIEW_OPS = {"getitem", "view", "split", "reshape", "size", "contiguous"}
_INPUT_ROLES = {
    "x": "T",
    "residual": "T",
    "positions": "T",
    "k_cache": "S",
    "v_cache": "S",
    "query_lens": "R",
    "context_lens": "R",
    "logits_indices": "R",
}


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


def versions() -> str:
    from simcast import __version__

    try:
        tv = metadata.version("torch")
    except metadata.PackageNotFoundError:
        tv = "none"
    return f"simcast{__version__}-torch{tv}-fmt{TRACE_FORMAT}"


def cache_dir() -> Path:
    base = os.environ.get("SIMCAST_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "simcast"
    )
    return Path(base) / "traces" / versions()


def _key_hash(key: StageKey) -> str:
    blob = json.dumps(dataclasses.asdict(key), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


# ---------------------------------------------------------------- (de)serialise
def _to_json(tr: StageTrace) -> dict:
    def arg(a):
        return {"t": dataclasses.asdict(a)} if isinstance(a, TensorArg) else {"v": a}

    return {
        "key": dataclasses.asdict(tr.key),
        "ops": [
            {
                "op": o.op,
                "scope": o.scope,
                "args": [arg(a) for a in o.args],
                "outputs": [dataclasses.asdict(t) for t in o.outputs],
            }
            for o in tr.ops
        ],
    }


def _tensor(d: dict) -> TensorArg:
    return TensorArg(shape=tuple(d["shape"]), dtype=d["dtype"], broadcast_dims=tuple(d["broadcast_dims"]))


def _from_json(d: dict) -> StageTrace:
    ops = tuple(
        OpRecord(
            op=o["op"],
            scope=o["scope"],
            args=tuple(_tensor(a["t"]) if "t" in a else a["v"] for a in o["args"]),
            outputs=tuple(_tensor(t) for t in o["outputs"]),
        )
        for o in d["ops"]
    )
    for o in ops:
        for a in o.args + o.outputs:
            if isinstance(a, TensorArg):
                for e in a.shape:
                    shape_fn(e)  # validates: a tampered cache entry fails here and is rebuilt
    return StageTrace(key=StageKey(**d["key"]), ops=ops, compiled=False)


# ------------------------------------------------------------- shape evaluation
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
    ast.Pow,
)
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


# --------------------------------------------------------------------- tracing
def _compile_trace(key: StageKey) -> StageTrace:
    import torch
    import torch._dynamo

    from simcast.trace.stage import StageModule, example_inputs

    graphs: list = []

    def recording_backend(gm, example_inputs_):  # a fresh backend per key: no silent cache hit
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()  # recompile limits are shared across instances of one class
    module = StageModule(key)
    inputs, _ = example_inputs(key)
    compiled = torch.compile(module, backend=recording_backend, fullgraph=True, dynamic=False)
    compiled(*inputs)
    if len(graphs) != 1:
        raise RuntimeError(f"expected one graph per stage module, got {len(graphs)}")
    return StageTrace(key=key, ops=_records(graphs[0], torch), compiled=True)


def _records(gm, torch) -> tuple[OpRecord, ...]:
    sym_role: dict[str, str] = {}
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        name = n.name.removeprefix("L_").removeprefix("l_").rstrip("_")
        v = n.meta.get("example_value")
        if name in _INPUT_ROLES and isinstance(v, torch.Tensor):
            sym_role[str(v.shape[0])] = _INPUT_ROLES[name]

    def dim(d) -> str:
        s = str(d)
        for sym, role in sorted(sym_role.items(), key=lambda kv: -len(kv[0])):
            s = s.replace(sym, role)
        shape_fn(s)
        return s

    def targ(v) -> TensorArg:
        dt = str(v.dtype).removeprefix("torch.")
        dt = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8"}.get(dt, dt)
        b = tuple(i for i, (sz, st) in enumerate(zip(v.shape, v.stride())) if st == 0 and str(sz) != "1")
        return TensorArg(shape=tuple(dim(s) for s in v.shape), dtype=dt, broadcast_dims=b)

    def val(a):
        if isinstance(a, torch.fx.Node):
            v = a.meta.get("example_value")
            return targ(v) if isinstance(v, torch.Tensor) else None
        if isinstance(a, (list, tuple)):
            return [val(x) for x in a] if not all(isinstance(x, (int, float)) for x in a) else list(a)
        return a if isinstance(a, (int, float, bool, str, type(None))) else str(a)

    out, seen_layer = [], False
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        op = (
            n.target
            if isinstance(n.target, str)
            else (n.target.name() if hasattr(n.target, "name") and callable(n.target.name) else n.target.__name__)
        )
        if op in _VIEW_OPS:
            continue
        scope = _scope(n.meta.get("nn_module_stack") or {})
        if scope is None:
            scope = "post" if seen_layer else "pre"
        else:
            seen_layer = True
        ev = n.meta.get("example_value")
        outs = ev if isinstance(ev, (tuple, list)) else (ev,)
        out.append(
            OpRecord(
                op=op,
                args=tuple(val(a) for a in n.args),
                outputs=tuple(targ(v) for v in outs if isinstance(v, torch.Tensor)),
                scope=scope,
            )
        )
    return tuple(out)


def _scope(stack: dict) -> str | None:
    for path, _ in stack.values():
        parts = path.replace("[", ".").replace("]", "").replace("'", "").split(".")
        if "layers" in parts:
            i = parts.index("layers")
            if i + 1 < len(parts) and parts[i + 1].isdigit():
                return f"layer{parts[i + 1]}"
    return None


# ---------------------------------------------------------------------- cache
_MEMORY: dict[StageKey, StageTrace] = {}


def get_trace(key: StageKey, use_disk_cache: bool = True) -> StageTrace:
    """The trace of the stage module for ``key``: memory, then disk, then compile."""
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    path = cache_dir() / f"{_key_hash(key)}.json"
    tr = None
    if use_disk_cache and path.is_file():
        try:
            tr = _from_json(json.loads(path.read_text()))
            if tr.key != key:
                tr = None
        except (ValueError, KeyError, TypeError, SyntaxError):
            tr = None  # corrupt or stale entry: rebuild
    if tr is None:
        tr = _compile_trace(key)
        if use_disk_cache:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps(_to_json(tr)))
                tmp.replace(path)  # atomic: nothing half-written is left
            except OSError:
                pass
    _MEMORY[key] = tr
    return tr


def clear_memory_cache() -> None:
    _MEMORY.clear()

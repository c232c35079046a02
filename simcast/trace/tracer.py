"""Trace stage-local modules with ``torch.compile`` on meta tensors.

A recording backend receives dynamo's graph of one stage-local module (never a
full model split afterwards) with symbolic token dims ``T`` (new tokens), ``R``
(requests) and ``S`` (KV-cache slots), and keeps every op with its symbolic
shapes (:mod:`simcast.trace.ir`). One compile serves every batch and length;
concrete shapes come by substitution. Pure views (getitem/view/split) cost
nothing and are not kept. Caching lives in :mod:`simcast.trace.cache`.
"""

from __future__ import annotations

from simcast.trace.ir import OpRecord, StageTrace, TensorArg, shape_fn
from simcast.trace.key import StageKey

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


def compile_trace(key: StageKey) -> StageTrace:
    """Compile the stage-local module of ``key`` once and record its ops (imports torch)."""
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

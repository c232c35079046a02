"""Stage traces cached in memory and on disk (JSON keyed by simcast, torch and format versions).

A warm process or a repeated run imports no compiler: :func:`get_trace` looks in memory,
then on disk, and compiles (:mod:`simcast.trace.tracer`) only on a miss. Entries are
written atomically; a corrupt or stale entry is rebuilt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

from simcast.trace.ir import OpRecord, StageTrace, TensorArg, shape_fn
from simcast.trace.key import StageKey

TRACE_FORMAT = 2


def versions() -> str:
    from simcast import __version__
    try:
        tv = metadata.version("torch")
    except metadata.PackageNotFoundError:
        tv = "none"
    return f"simcast{__version__}-torch{tv}-fmt{TRACE_FORMAT}"


def cache_dir() -> Path:
    base = os.environ.get("SIMCAST_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "simcast")
    return Path(base) / "traces" / versions()


def _key_hash(key: StageKey) -> str:
    blob = json.dumps(dataclasses.asdict(key), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _to_json(tr: StageTrace) -> dict:
    def arg(a):
        return {"t": dataclasses.asdict(a)} if isinstance(a, TensorArg) else {"v": a}
    return {"key": dataclasses.asdict(tr.key),
            "ops": [{"op": o.op, "scope": o.scope, "args": [arg(a) for a in o.args],
                     "outputs": [dataclasses.asdict(t) for t in o.outputs]} for o in tr.ops]}


def _tensor(d: dict) -> TensorArg:
    return TensorArg(shape=tuple(d["shape"]), dtype=d["dtype"], broadcast_dims=tuple(d["broadcast_dims"]))


def _from_json(d: dict) -> StageTrace:
    ops = tuple(OpRecord(op=o["op"], scope=o["scope"],
                         args=tuple(_tensor(a["t"]) if "t" in a else a["v"] for a in o["args"]),
                         outputs=tuple(_tensor(t) for t in o["outputs"])) for o in d["ops"])
    for o in ops:
        for a in o.args + o.outputs:
            if isinstance(a, TensorArg):
                for e in a.shape:
                    shape_fn(e)  # validates: a tampered cache entry fails here and is rebuilt
    k = dict(d["key"], layer_kinds=tuple(d["key"].get("layer_kinds", ())))  # JSON has lists
    return StageTrace(key=StageKey(**k), ops=ops, compiled=False)


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
        from simcast.trace.tracer import compile_trace
        tr = compile_trace(key)
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

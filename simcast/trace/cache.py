"""Stage traces cached in memory and on disk (JSON keyed by simcast, torch and format versions).

A warm process or a repeated run imports no compiler: :func:`get_trace` looks in memory,
then on disk, and compiles (:mod:`simcast.trace.tracer`) only on a miss. Entries are
written atomically. An entry is trusted only if it verifies (:func:`verify_entry`): read
through the checked JSON loader (size, UTF-8, depth), its SHA-256 over the canonical JSON
of key and ops matches, its key is the one asked for, and every op name, dtype, shape
expression, scope and scalar is one a trace can hold. Anything else -- corrupt, stale,
hand-edited -- is rebuilt, never trusted and never a crash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from simcast.core.errors import SimcastInputError
from simcast.inputs.files import load_json
from simcast.trace.ir import KNOWN_DTYPES, KNOWN_OPS, OpRecord, StageTrace, TensorArg, shape_fn
from simcast.trace.key import StageKey

TRACE_FORMAT = 3  # 3: entries carry a sha256 of their content
MAX_OPS = 10_000  # a stage-local module is its edge modules plus <= 2 traced layers: ~40 ops
_SCOPE = re.compile(r"pre|post|layer[0-9]{1,6}")


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


def _digest(body: dict) -> str:
    """SHA-256 of the canonical JSON of an entry's ``key`` and ``ops``."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _to_json(tr: StageTrace) -> dict:
    def arg(a: Any) -> dict:
        return {"t": dataclasses.asdict(a)} if isinstance(a, TensorArg) else {"v": a}

    body = {
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
    body = json.loads(json.dumps(body))  # tuples -> lists: the digest covers what a reader will see
    return {"format": TRACE_FORMAT, "sha256": _digest(body), **body}


class _Invalid(ValueError):
    """A cache entry that does not verify."""


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise _Invalid(what)


def _tensor(d: Any) -> TensorArg:
    _check(isinstance(d, dict) and set(d) == {"shape", "dtype", "broadcast_dims"}, "tensor fields")
    shape, dtype, bdims = d["shape"], d["dtype"], d["broadcast_dims"]
    _check(isinstance(shape, list) and len(shape) <= 8 and all(isinstance(e, str) for e in shape), "shape")
    for e in shape:
        shape_fn(e)  # the whitelist: a bad expression raises ValueError
    _check(dtype in KNOWN_DTYPES, f"dtype {str(dtype)[:20]}")
    _check(isinstance(bdims, list) and all(type(i) is int and 0 <= i < len(shape) for i in bdims), "broadcast dims")
    return TensorArg(shape=tuple(shape), dtype=dtype, broadcast_dims=tuple(bdims))


def _scalar(v: Any) -> Any:
    if isinstance(v, list):
        _check(len(v) <= 64 and all(type(x) in (int, float) for x in v), "scalar list")
        return v
    _check(v is None or type(v) in (bool, int, str, float), "scalar type")
    _check(not isinstance(v, float) or math.isfinite(v), "finite scalar")
    _check(not isinstance(v, str) or len(v) <= 64, "short string")
    return v


def verify_entry(d: Any, key: StageKey) -> StageTrace:
    """The trace a parsed cache entry holds for ``key``; raises ``ValueError`` unless it verifies."""
    _check(isinstance(d, dict) and set(d) == {"format", "sha256", "key", "ops"}, "entry fields")
    _check(d["format"] == TRACE_FORMAT, "format")
    body = {"key": d["key"], "ops": d["ops"]}
    _check(d["sha256"] == _digest(body), "checksum")
    _check(d["key"] == json.loads(json.dumps(dataclasses.asdict(key))), "key")
    ops = d["ops"]
    _check(isinstance(ops, list) and 0 < len(ops) <= MAX_OPS, "op count")
    recs = []
    for o in ops:
        _check(isinstance(o, dict) and set(o) == {"op", "scope", "args", "outputs"}, "op fields")
        _check(o["op"] in KNOWN_OPS, f"op {str(o['op'])[:40]}")
        _check(isinstance(o["scope"], str) and _SCOPE.fullmatch(o["scope"]) is not None, "scope")
        _check(isinstance(o["args"], list) and isinstance(o["outputs"], list), "args")
        args = []
        for a in o["args"]:
            _check(isinstance(a, dict) and len(a) == 1 and ("t" in a or "v" in a), "arg")
            args.append(_tensor(a["t"]) if "t" in a else _scalar(a["v"]))
        recs.append(
            OpRecord(op=o["op"], scope=o["scope"], args=tuple(args), outputs=tuple(_tensor(t) for t in o["outputs"]))
        )
    return StageTrace(key=key, ops=tuple(recs), compiled=False)


def _read_entry(path: Path, key: StageKey) -> StageTrace | None:
    """The verified trace in ``path``, or None (missing, unreadable, corrupt, stale or edited)."""
    if not path.is_file():
        return None
    try:
        return verify_entry(load_json(path, "trace cache entry"), key)
    except (SimcastInputError, ValueError, KeyError, TypeError):
        return None


_MEMORY: dict[StageKey, StageTrace] = {}


def is_cached(key: StageKey) -> bool:
    """Whether ``key``'s trace is in memory or has a disk entry (not verified: an estimate of the work ahead)."""
    return key in _MEMORY or (cache_dir() / f"{_key_hash(key)}.json").is_file()


def get_trace(key: StageKey, use_disk_cache: bool = True) -> StageTrace:
    """The trace of the stage module for ``key``: memory, then a verified disk entry, then compile."""
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    path = cache_dir() / f"{_key_hash(key)}.json"
    tr = _read_entry(path, key) if use_disk_cache else None
    if tr is None:
        from simcast.trace.tracer import compile_trace

        tr = compile_trace(key)
        if use_disk_cache:
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps(_to_json(tr)))
                tmp.replace(path)  # atomic: nothing half-written is left
            except OSError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
    _MEMORY[key] = tr
    return tr


def clear_memory_cache() -> None:
    _MEMORY.clear()

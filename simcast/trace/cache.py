"""Stage traces cached in memory and on disk (JSON keyed by simcast, torch and format versions).

A warm process or a repeated run imports no compiler: :func:`get_trace` looks in memory,
then on disk, and compiles (:mod:`simcast.trace.tracer`) only on a miss. Entries are
written atomically. An entry is trusted only if it verifies (:func:`verify_entry`): read
through the checked JSON loader (size, UTF-8, depth), its SHA-256 over the canonical JSON
of key and ops matches, its key is the one asked for, and every op name, dtype, shape
expression, scope and scalar is one a trace can hold and makes sense (every dim at least 1
and bounded at probe batch sizes, every tensor at least one dim, every collective over
1..65536 ranks: a checksum proves only that the entry was not damaged, not that the hand
that wrote it knew what a trace is). Anything else -- corrupt, stale, hand-edited, absurd --
is rebuilt, never trusted and never a crash. A cache folder that cannot be used (under a
file, without permissions; no home folder: a temporary one; a HOME that does not exist: no disk
cache, and no folder made) is a warning, not an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import sys
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from simcast.core.errors import SimcastInputError
from simcast.core.version import VERSION
from simcast.inputs.files import is_file, load_json
from simcast.inputs.limits import MAX_DEVICES
from simcast.trace.ir import KNOWN_DTYPES, KNOWN_OPS, OpRecord, StageTrace, TensorArg, shape_fn
from simcast.trace.key import StageKey, key_dict

TRACE_FORMAT = 3  # 3: entries carry a sha256 of their content
MAX_OPS = 10_000  # a stage-local module is its edge modules plus <= 2 traced layers: ~40 ops
_SCOPE = re.compile(r"pre|post|layer[0-9]{1,6}")
MAX_DIM = 2**40
"""Largest tensor dim (and whole-number scalar) an entry may hold at the probe sizes (the tracer writes
model dims <= 2^24 and T, R, S)."""
_PROBES = ((1, 1, 1), (3, 2, 257))
"""(T, R, S) at which every symbolic dim of an entry is evaluated when it is read: in [1, MAX_DIM]."""
_LARGE = (2**20, 2**16, 2**24)
"""A large step (T, R, S) at which every dim must still be >= 1 (an edit like ``4096-T`` would go negative)."""
_GROUP_OPS = frozenset({"simcast::all_reduce", "simcast::all_gather"})
MAX_GROUP = MAX_DEVICES  # ranks of a collective group


@lru_cache(maxsize=1)
def _torch_version() -> str:
    """The installed torch's version ("none" without torch); read once: the package metadata is parsed on
    every lookup and the cache folder is asked for at every stage. The ``Version:`` line of the first
    ``torch-*.dist-info/METADATA`` on ``sys.path`` (what ``importlib.metadata.version`` reads, without
    its ~0.1 s import), else ``importlib.metadata`` (eggs, zips and other layouts)."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("torch-") and name.endswith(".dist-info"):
                v = _metadata_version(Path(entry or ".") / name / "METADATA")
                if v:
                    return v
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def _metadata_version(path: Path) -> str:
    """The ``Version:`` header of a dist-info METADATA file ("" when unreadable or absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.removeprefix("Version:").strip()
                if not line.strip():  # the headers end at the first blank line
                    break
    except (OSError, UnicodeDecodeError):
        pass
    return ""


def versions() -> str:
    return f"simcast{VERSION}-torch{_torch_version()}-fmt{TRACE_FORMAT}"


def cache_dir() -> Path:
    """``$SIMCAST_CACHE_DIR``, else ``$XDG_CACHE_HOME/simcast``, else ``~/.cache/simcast``, then
    ``traces/<versions>``. Without a usable home (HOME unset, empty or not absolute: ``~`` would become
    ``/.cache`` or a relative folder, outside the user's space) a per-user folder under the system's
    temporary directory is used, and a warning says so."""
    base = os.environ.get("SIMCAST_CACHE_DIR") or ""
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or ""
        home = os.environ.get("HOME") or ""
        if os.path.isabs(xdg):
            base = os.path.join(xdg, "simcast")
        elif os.path.isabs(home) and home.rstrip("/"):
            base = os.path.join(home, ".cache", "simcast")
        else:
            base = os.path.join(tempfile.gettempdir(), f"simcast-cache-{_user_id()}")
            _warn_once(
                f"HOME is {'not set' if not home else repr(home[:60]) + ', not an absolute folder'}: "
                f"the trace cache is {base} (temporary); set SIMCAST_CACHE_DIR to keep it"
            )
    return Path(base) / "traces" / versions()


def disk_cache_on() -> bool:
    """Whether entries are read from and written to :func:`cache_dir`: not when the folder would be made
    under a HOME that does not exist (a typo, a container without one): the run goes on without the disk
    cache, and a warning says so, rather than creating a home folder."""
    if os.environ.get("SIMCAST_CACHE_DIR") or os.path.isabs(os.environ.get("XDG_CACHE_HOME") or ""):
        return True
    home = os.environ.get("HOME") or ""
    if os.path.isabs(home) and home.rstrip("/") and not os.path.isdir(home):
        _warn_once(
            f"HOME {home[:60]!r} does not exist: traces are not kept on disk (set SIMCAST_CACHE_DIR to keep them)"
        )
        return False
    return True


def _user_id() -> str:
    try:
        return str(os.getuid())
    except AttributeError:  # Windows
        return "user"


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _usable(folder: Path) -> bool:
    """Whether ``folder`` exists or can be made, and can be searched and written; a warning says when not
    (a cache folder under a regular file, or one without permissions): traces are then not kept on disk."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK | os.X_OK):
            return True
        why = "not writable"
    except (OSError, ValueError) as e:
        why = getattr(e, "strerror", None) or str(e)
    _warn_once(f"trace cache folder {str(folder)[:200]} cannot be used ({why}); traces are not kept on disk")
    return False


def _key_hash(key: StageKey) -> str:
    blob = json.dumps(key_dict(key), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _digest(body: dict) -> str:
    """SHA-256 of the canonical JSON of an entry's ``key`` and ``ops``."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _to_json(tr: StageTrace) -> dict:
    def arg(a: Any) -> dict:
        return {"t": dataclasses.asdict(a)} if isinstance(a, TensorArg) else {"v": a}

    body = {
        "key": key_dict(tr.key),
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
    _check(isinstance(shape, list) and 1 <= len(shape) <= 8 and all(isinstance(e, str) for e in shape), "shape")
    for e in shape:
        f = shape_fn(e)  # the whitelist: a bad expression raises ValueError
        # a dim must make sense for any batch: at least 1 (a 0 divides by zero in the cost formulas, a
        # negative one gives negative time), at most MAX_DIM
        _check(all(1 <= f(*p) <= MAX_DIM for p in _PROBES) and f(*_LARGE) >= 1, f"dim {e[:20]}")
    _check(dtype in KNOWN_DTYPES, f"dtype {str(dtype)[:20]}")
    _check(isinstance(bdims, list) and all(type(i) is int and 0 <= i < len(shape) for i in bdims), "broadcast dims")
    return TensorArg(shape=tuple(shape), dtype=dtype, broadcast_dims=tuple(bdims))


def _scalar(v: Any) -> Any:
    if isinstance(v, list):
        _check(len(v) <= 64 and all(type(x) in (int, float) and abs(x) <= MAX_DIM for x in v), "scalar list")
        return v
    _check(v is None or type(v) in (bool, int, str, float), "scalar type")
    _check(not isinstance(v, float) or math.isfinite(v), "finite scalar")
    _check(type(v) is not int or 0 <= v <= MAX_DIM, "whole-number scalar in range")
    _check(not isinstance(v, str) or len(v) <= 64, "short string")
    return v


UNREGISTERED_OPS = frozenset({"add"})
"""Ops a traced graph holds besides simcast's leaf ops (:data:`~simcast.trace.ir.KNOWN_OPS`, each with its cost
formula): Python's ``+`` of two tensors, the routed plus the shared experts' output of a MoE layer with shared
experts (DeepSeek-V3, :mod:`simcast.trace.moe`), traces as ``add``. It has no formula row: the cost prices it by
the labelled memory-bound estimate of an unregistered op (:func:`simcast.cost.ops.compute.op_cost`: inputs and
output read/written once). A cache entry may hold it (it did not verify, so every process re-traced)."""


def verify_entry(d: Any, key: StageKey) -> StageTrace:
    """The trace a parsed cache entry holds for ``key``; raises ``ValueError`` unless it verifies."""
    _check(isinstance(d, dict) and set(d) == {"format", "sha256", "key", "ops"}, "entry fields")
    _check(d["format"] == TRACE_FORMAT, "format")
    body = {"key": d["key"], "ops": d["ops"]}
    _check(d["sha256"] == _digest(body), "checksum")
    _check(d["key"] == json.loads(json.dumps(key_dict(key))), "key")
    ops = d["ops"]
    _check(isinstance(ops, list) and 0 < len(ops) <= MAX_OPS, "op count")
    recs = []
    for o in ops:
        _check(isinstance(o, dict) and set(o) == {"op", "scope", "args", "outputs"}, "op fields")
        _check(o["op"] in KNOWN_OPS or o["op"] in UNREGISTERED_OPS, f"op {str(o['op'])[:40]}")
        _check(isinstance(o["scope"], str) and _SCOPE.fullmatch(o["scope"]) is not None, "scope")
        _check(isinstance(o["args"], list) and isinstance(o["outputs"], list), "args")
        args = []
        for a in o["args"]:
            _check(isinstance(a, dict) and len(a) == 1 and ("t" in a or "v" in a), "arg")
            args.append(_tensor(a["t"]) if "t" in a else _scalar(a["v"]))
        if o["op"] in _GROUP_OPS:  # the group size a collective is costed over: a rank count of this stage
            _check(len(args) >= 2 and type(args[1]) is int and 1 <= args[1] <= MAX_GROUP, "collective group size")
        recs.append(
            OpRecord(op=o["op"], scope=o["scope"], args=tuple(args), outputs=tuple(_tensor(t) for t in o["outputs"]))
        )
    return StageTrace(key=key, ops=tuple(recs), compiled=False)


def _read_entry(path: Path, key: StageKey) -> StageTrace | None:
    """The verified trace in ``path``, or None (missing, unreadable, corrupt, stale or edited)."""
    try:
        if not is_file(path, "trace cache entry"):
            return None
        return verify_entry(load_json(path, "trace cache entry"), key)
    except (SimcastInputError, ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError):
        return None


# ------------------------------------------------------------------ shipped traces
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"
"""Pre-built entries (package data, written by ``scripts/build_shipped_traces.py``): the same artifact as a
disk-cache entry, compiled ahead of time from the same stage-local modules, verified the same way."""
TRACER_SOURCES = (
    "ir.py",
    "key.py",
    "ops.py",
    "moe.py",
    "mla.py",
    "quant.py",
    "stage.py",
    "tracer.py",
    "linear_attention.py",
)
"""The files of :mod:`simcast.trace` a traced graph depends on: a shipped set is used only while their
SHA-256 is the one it was built from."""


def tracer_sha256() -> str:
    """SHA-256 over the tracer's sources (:data:`TRACER_SOURCES`, in that order)."""
    h = hashlib.sha256()
    for name in TRACER_SOURCES:
        h.update(name.encode() + b"\0" + (Path(__file__).parent / name).read_bytes() + b"\0")
    return h.hexdigest()


def public_version(v: str) -> str:
    """A version without its local label (``2.13.0+cpu`` -> ``2.13.0``): CPU and CUDA builds of one torch
    release share dynamo, so they trace the same graph."""
    return v.split("+", 1)[0]


@lru_cache(maxsize=1)
def shipped_usable() -> bool:
    """Whether the shipped traces apply here: their manifest reads, names this trace format, the installed
    torch's public version and the tracer sources' SHA-256. Otherwise (another torch, an edited tracer, no
    torch) every trace is compiled as before: the fallback. ``SIMCAST_SHIPPED_TRACES=0`` turns them off."""
    if os.environ.get("SIMCAST_SHIPPED_TRACES", "1") == "0":
        return False
    try:
        m = load_json(SHIPPED_DIR / "manifest.json", "shipped trace manifest")
    except SimcastInputError:
        return False
    return (
        isinstance(m, dict)
        and m.get("format") == TRACE_FORMAT
        and m.get("torch") == public_version(_torch_version())
        and m.get("tracer_sha256") == tracer_sha256()
    )


def _shipped_path(key: StageKey) -> Path:
    return SHIPPED_DIR / f"{_key_hash(key)}.json"


def _shipped(key: StageKey) -> StageTrace | None:
    """The verified shipped trace of ``key``, or None (none shipped for it, or not usable here)."""
    return _read_entry(_shipped_path(key), key) if shipped_usable() else None


def entry_json(tr: StageTrace) -> str:
    """The text of a cache (or shipped) entry for ``tr``."""
    return json.dumps(_to_json(tr), allow_nan=False)


_MEMORY: dict[StageKey, StageTrace] = {}


def is_cached(key: StageKey) -> bool:
    """Whether ``key``'s trace is in memory or has a disk or shipped entry (not verified: an estimate of the
    work ahead)."""
    if key in _MEMORY:
        return True
    try:
        if shipped_usable() and is_file(_shipped_path(key), "shipped trace"):
            return True
        return disk_cache_on() and is_file(cache_dir() / f"{_key_hash(key)}.json", "trace cache entry")
    except SimcastInputError:  # an unusable cache folder: nothing is cached
        return False


def get_trace(key: StageKey, use_disk_cache: bool = True) -> StageTrace:
    """The trace of the stage module for ``key``: memory, then a verified disk entry, then a verified shipped
    entry, then compile. ``use_disk_cache=False`` (``--no-cache``) compiles (neither disk nor shipped)."""
    hit = _MEMORY.get(key)
    if hit is not None:
        return hit
    disk = use_disk_cache and disk_cache_on()
    path = cache_dir() / f"{_key_hash(key)}.json"
    tr = _read_entry(path, key) if disk else None
    if tr is None and use_disk_cache:
        tr = _shipped(key)
    if tr is None:
        from simcast.trace.tracer import compile_trace

        tr = compile_trace(key)
        if disk and _usable(path.parent):
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            try:
                tmp.write_text(entry_json(tr))
                tmp.replace(path)  # atomic: nothing half-written is left
            except OSError:
                pass
            finally:
                try:
                    tmp.unlink(missing_ok=True)
                except OSError:
                    pass
    _MEMORY[key] = tr
    return tr


def clear_memory_cache() -> None:
    _MEMORY.clear()

"""Read the measured-kernel database of the ``aiconfigurator-core`` package (optional extra).

``pip install 'simcast[measured]'`` installs ``aiconfigurator-core`` (NVIDIA,
Apache-2.0), whose wheel ships parquet tables under
``aiconfigurator_core/systems/data/<system>/<kind>/<engine>/<version>/<table>.parquet``.
simcast reads those files directly with pandas: never through the package's
query API, whose look-ups may inherit rows from other backends and versions.
Nothing is copied into the repository.

Units (the package's SDK docstrings, checked on the data): ``latency`` is
milliseconds per call; NCCL and custom all-reduce ``message_size`` counts
elements (``nccl_dtype``/``allreduce_dtype`` gives the element size).

**Reserved tables.** For ``h100_sxm`` and ``h200_sxm`` the tables under
``gemm/vllm/0.24.0``, ``attention/vllm/0.24.0`` and ``comm/nccl/2.29.2`` are
kept for independent validation: :func:`guard` refuses them, and every path
this module opens goes through it. Two more folders hold NCCL rows tagged
version 2.29.2 (``h100_sxm/comm/nccl/2.27.3``, ``h200_sxm/comm/nccl/2.26.2``)
and may be the same measurements; they are refused as well.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

from simcast.core.dtypes import element_bytes
from simcast.core.errors import SimcastInputError
from simcast.engines import get_engine

PACKAGE = "aiconfigurator_core"
DISTRIBUTION = "aiconfigurator-core"
INSTALL_HINT = "needs the optional extra: pip install 'simcast[measured]' (installs aiconfigurator-core)"

RESERVED: frozenset[tuple[str, str, str, str]] = frozenset(
    (system, kind, engine, version)
    for system in ("h100_sxm", "h200_sxm")
    for kind, engine, version in (
        ("gemm", "vllm", "0.24.0"),
        ("attention", "vllm", "0.24.0"),
        ("comm", "nccl", "2.29.2"),
    )
)
"""(system, kind, engine, version) folders kept for independent validation: never read."""

SUSPECT: frozenset[tuple[str, str, str, str]] = frozenset(
    {("h100_sxm", "comm", "nccl", "2.27.3"), ("h200_sxm", "comm", "nccl", "2.26.2")}
    | {(s, kind, "vllm", "0.22.0") for s in ("h100_sxm", "h200_sxm") for kind in ("gemm", "attention")}
)
"""Folders that may hold the reserved data under another name; never read: the NCCL ones' rows are all tagged
NCCL 2.29.2; the vLLM 0.22.0 GEMM and attention folders of H100/H200 carry a ``reuse.yaml`` naming 0.24.0 as
their donor (ai-dynamo/aiconfigurator ``aic-core/src/aiconfigurator_core/systems/data``@095f58a5; H200's also
holds parquet tables, whose relation to the donor cannot be checked without reading it)."""


def available() -> bool:
    """Whether the optional extra is installed (without importing its compiled engine)."""
    return importlib.util.find_spec(PACKAGE) is not None


_ROOT_OVERRIDE: list[Path] = []
"""A data folder read instead of the installed package's (:func:`use_data_root`); empty: the package's."""


def use_data_root(path: str | Path | None) -> None:
    """Read tables from ``path`` (``None``: the installed package again).

    For scripts measuring older engine versions the wheel no longer ships: ``path`` is
    ``aic-core/src/aiconfigurator_core/systems/data`` of an ai-dynamo/aiconfigurator checkout at a named
    commit (e.g. ``scripts/vllm_hopper_decode.py``). The reserved and suspected folders stay refused.
    """
    _ROOT_OVERRIDE.clear()
    if path is not None:
        _ROOT_OVERRIDE.append(Path(path))


def data_root() -> Path:
    """``.../aiconfigurator_core/systems/data`` (or :func:`use_data_root`'s); a one-line error when the extra
    is missing."""
    if _ROOT_OVERRIDE:
        return _ROOT_OVERRIDE[0]
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SimcastInputError("--from-db", "aiconfigurator", INSTALL_HINT)
    root = Path(list(spec.submodule_search_locations)[0]) / "systems" / "data"
    if not root.is_dir():
        raise SimcastInputError("--from-db", "aiconfigurator", f"{root} is missing; reinstall: {INSTALL_HINT}")
    return root


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        raise SimcastInputError("--from-db", "aiconfigurator", INSTALL_HINT) from None


def guard(system: str, kind: str, engine: str, version: str) -> None:
    """Refuse the reserved (and suspected reserved) folders; the single gate every read passes."""
    key = (system, kind, engine, version)
    if key in RESERVED or key in SUSPECT:
        why = (
            "reserved for independent validation"
            if key in RESERVED
            else "holds rows tagged NCCL 2.29.2 (possibly the reserved table)"
        )
        raise SimcastInputError("aiconfigurator table", "/".join(key), f"is {why}; simcast never reads it")


def _guard_path(path: Path, root: Path) -> tuple[str, str, str, str]:
    """The (system, kind, engine, version) of a resolved table path under ``root``, guarded."""
    rel = path.resolve().relative_to(root.resolve()).parts
    if len(rel) < 5:
        raise SimcastInputError("aiconfigurator table", str(path), "is not <system>/<kind>/<engine>/<version>/<table>")
    key = (rel[0], rel[1], rel[2], rel[3])
    guard(*key)
    return key


def versions(system: str, kind: str, engine: str) -> list[str]:
    """Version folders holding parquet tables for ``system/kind/engine`` (reserved ones left out).

    Only directory names are listed; folders with just a ``reuse.yaml`` (pointers to a donor
    version) are skipped, since their rows are another version's.
    """
    base = data_root() / system / kind / engine
    if not base.is_dir():
        return []
    out = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()):
        key = (system, kind, engine, d.name)
        if key in RESERVED or key in SUSPECT:
            continue
        if any(d.glob("*.parquet")):
            out.append(d.name)
    return out


def systems() -> list[str]:
    return sorted(p.name for p in data_root().iterdir() if p.is_dir() and any(p.iterdir()))


def read_table(system: str, kind: str, engine: str, version: str, table: str):
    """One parquet table as a DataFrame (guarded); a missing table is a one-line error."""
    guard(system, kind, engine, version)
    root = data_root()
    path = root / system / kind / engine / version / f"{table}.parquet"
    _guard_path(path, root)  # also after resolving symlinks
    if not path.is_file():
        raise SimcastInputError(
            "aiconfigurator table", f"{system}/{kind}/{engine}/{version}/{table}", "not in the installed package"
        )
    try:
        return _read_parquet(str(path)).copy()
    except ImportError as e:  # pyarrow comes with the extra
        raise SimcastInputError("--from-db", "aiconfigurator", f"{INSTALL_HINT} ({e})") from None


@lru_cache(maxsize=64)
def _read_parquet(path: str):
    import pandas as pd

    return pd.read_parquet(path)


# ------------------------------------------------------------------ conversion to the generic schema
# Every converter returns rows of simcast's generic measured schema (see simcast.calib.validation.validate):
# kind, device, engine, dtype, m, n, k, batch, q_len, kv_len, heads, kv_heads, head_dim, bytes, gpus,
# nodes, time_s, op (the kernel the engine ran), source (system/kind/engine/version/table).
GEMM_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4"}
"""GEMM families simcast models; int4/int8 weight-only and nvfp4 rows are left out."""
_ELEM_BYTES = {a: int(element_bytes(a)) for a in ("half", "float16", "bfloat16", "int8", "float32", "fp8")}
"""Bytes per element of the NCCL / all-reduce dtype names the database uses (:mod:`simcast.core.dtypes`)."""
_KV_DTYPES = {"bfloat16": "bf16", "float16": "bf16", "fp8": "fp8"}


def _source(system: str, kind: str, engine: str, version: str, table: str) -> str:
    return f"aiconfigurator/{system}/{kind}/{engine}/{version}/{table}"


def gemm_rows(system: str, engine: str, version: str, device: str):
    """``gemm`` rows (bf16, fp8 per-tensor, fp8 block-scaled) of one engine's GEMM table."""
    import pandas as pd

    df = read_table(system, "gemm", engine, version, "gemm_perf")
    df = df[df["gemm_dtype"].isin(GEMM_DTYPES)]
    return pd.DataFrame(
        {
            "kind": "gemm",
            "device": device,
            "engine": engine,
            "dtype": df["gemm_dtype"].map(GEMM_DTYPES),
            "m": df["m"].astype(int),
            "n": df["n"].astype(int),
            "k": df["k"].astype(int),
            "time_s": df["latency"].astype(float) * 1e-3,
            "op": df["kernel_source"].astype(str),
            "source": _source(system, "gemm", engine, version, "gemm_perf"),
        }
    ).reset_index(drop=True)


def _kv_len_decode(engine: str, step):
    """Keys per request in a generation row: the collectors differ
    (:meth:`simcast.engines.base.Engine.decode_kv_len` of each engine)."""
    return get_engine(engine).decode_kv_len(step)


def context_attention_dtype(engine: str, kv_cache_dtype: str) -> str | None:
    """The ``attn_dtype`` of the prefill rows kept for ``engine`` with that KV cache: the one its default runs
    (:meth:`simcast.engines.base.Engine.context_attention_dtype`; ``None``: keep every row)."""
    return get_engine(engine).context_attention_dtype(kv_cache_dtype)


def attention_rows(system: str, engine: str, version: str, device: str):
    """``attention_prefill`` and ``attention_decode`` rows; full attention only (window 0), beam 1.

    ``dtype`` is the KV-cache dtype (bf16 or fp8): with an fp8 cache the engines run fp8
    attention kernels (vLLM's FlashAttention casts q to fp8), and decode reads fp8 keys.
    Prefill rows keep only the attention dtype the engine runs by default (:func:`context_attention_dtype`).
    """
    import pandas as pd

    out = []
    for table, phase in (("context_attention_perf", "prefill"), ("generation_attention_perf", "decode")):
        df = read_table(system, "attention", engine, version, table)
        if "window_size" in df:
            df = df[df["window_size"] == 0]
        if "beam_width" in df:
            df = df[df["beam_width"] == 1]
        df = df[df["kv_cache_dtype"].isin(_KV_DTYPES)]
        if phase == "prefill" and "attn_dtype" in df:
            want = df["kv_cache_dtype"].map(lambda kv: context_attention_dtype(engine, kv))
            df = df[want.isna() | (df["attn_dtype"] == want)]
        if phase == "prefill":
            q_len = df["isl"].astype(int)
            kv_len = q_len + df["step"].astype(int)
        else:
            q_len = pd.Series(1, index=df.index)
            kv_len = _kv_len_decode(engine, df["step"].astype(int))
        out.append(
            pd.DataFrame(
                {
                    "kind": f"attention_{phase}",
                    "device": device,
                    "engine": engine,
                    "dtype": df["kv_cache_dtype"].map(_KV_DTYPES),
                    "batch": df["batch_size"].astype(int),
                    "q_len": q_len,
                    "kv_len": kv_len,
                    "heads": df["num_heads"].astype(int),
                    "kv_heads": df["num_key_value_heads"].astype(int),
                    "head_dim": df["head_dim"].astype(int),
                    "time_s": df["latency"].astype(float) * 1e-3,
                    "op": df["kernel_source"].astype(str),
                    "source": _source(system, "attention", engine, version, table),
                }
            )
        )
    return pd.concat(out, ignore_index=True)


def nccl_rows(system: str, version: str, device: str, ops: tuple[str, ...] = ("all_reduce", "all_gather")):
    """NCCL's own collectives (``engine`` = ``nccl``); ``bytes`` = elements × element size.

    ``message_size`` counts elements (nccl-tests' count): the half sweep stops at 2^28 and the
    int8 sweep at 2^29, both 512 MiB, and the implied 8-GPU bus bandwidth fits NVLink only so.
    """
    import pandas as pd

    df = read_table(system, "comm", "nccl", version, "nccl_perf")
    df = df[df["op_name"].isin(ops) & df["nccl_dtype"].isin(_ELEM_BYTES)]
    # each key is measured twice in some tables: keep the median
    keys = ["op_name", "nccl_dtype", "num_gpus", "message_size"]
    df = df.groupby(keys, as_index=False)["latency"].median()
    kind = df["op_name"].map({"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter"})
    return pd.DataFrame(
        {
            "kind": kind,
            "device": device,
            "engine": "nccl",
            "dtype": df["nccl_dtype"].astype(str),
            "bytes": df["message_size"].astype(int) * df["nccl_dtype"].map(_ELEM_BYTES),
            "gpus": df["num_gpus"].astype(int),
            "nodes": 1,
            "time_s": df["latency"].astype(float) * 1e-3,
            "op": "nccl_" + df["op_name"],
            "source": _source(system, "comm", "nccl", version, "nccl_perf"),
        }
    )


def custom_allreduce_rows(system: str, engine: str, version: str, device: str, mode: str = "graph"):
    """The engine's all-reduce as it issues it (custom one-/two-shot kernels, NCCL past its cutoff).

    vLLM and SGLang tables time a CUDA-graph and an eager variant: ``mode`` picks one
    (engines replay decode steps as CUDA graphs). ``bytes`` = elements × 2 (bf16).
    """
    import pandas as pd

    df = read_table(system, "comm", engine, version, "custom_allreduce_perf")
    if "backend" in df and mode:
        df = df[df["backend"].astype(str).str.endswith(mode) | ~df["backend"].astype(str).str.contains("_")]
    df = df[df["op_name"] == "all_reduce"]
    df = df.groupby(["allreduce_dtype", "num_gpus", "message_size"], as_index=False)["latency"].median()
    return pd.DataFrame(
        {
            "kind": "allreduce",
            "device": device,
            "engine": engine,
            "dtype": "bf16",
            "bytes": df["message_size"].astype(int) * df["allreduce_dtype"].map(_ELEM_BYTES).fillna(2).astype(int),
            "gpus": df["num_gpus"].astype(int),
            "nodes": 1,
            "time_s": df["latency"].astype(float) * 1e-3,
            "op": f"{engine}_custom_allreduce",
            "source": _source(system, "comm", engine, version, "custom_allreduce_perf"),
        }
    )

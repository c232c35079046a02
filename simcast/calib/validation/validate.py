"""Predicted vs measured kernel times: per-row predictions and error tables.

Input rows follow the generic schema (docs/accuracy.md): ``kind, device, dtype, m, n, k,
batch, q_len, kv_len, heads, kv_heads, head_dim, bytes, gpus, nodes, time_s``
(+ ``model`` for ``layer`` rows; optional ``op``, ``source``, ``engine``, and ``v_head_dim`` on attention rows
whose values' head size differs from the keys', :mod:`simcast.cost.kernels.diff_kv`). Kinds:
``gemm``, ``attention_prefill``, ``attention_decode``, ``allreduce``,
``allgather``, ``p2p``, ``layer`` and simcast's elementwise kinds
``rms_norm``/``add``/``silu_and_mul`` (m tokens, n width) and ``rope`` (m
tokens, heads, kv_heads, head_dim per rank). A row that cannot be predicted
gets ``predicted_s = None`` and a reason — never a guess.

The optional ``engine`` column (``vllm``, ``sglang``, ``trtllm``) picks the
profile's fitted kernels for that engine (GEMM, attention, its all-reduce as it
issues it); ``nccl`` marks NCCL's own all-reduce; empty = the generic roofline.
For attention rows ``dtype`` is the KV-cache dtype (bf16 or fp8).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simcast.calib.readers.measured_schema import GENERIC_COLUMNS
from simcast.core.device import DeviceSpec
from simcast.core.errors import SimcastInputError, require
from simcast.core.model_spec import ModelSpec
from simcast.cost.kernels import one_kernel as kernels
from simcast.inputs.files import load_csv, numeric_column
from simcast.inputs.limits import (
    MAX_DEVICES,
    MAX_GEMM_DIM,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_MESSAGE_BYTES,
    MAX_REQUESTS,
    MAX_TOKENS,
)

NETWORK_KINDS = ("allreduce", "allgather", "p2p")
TOKEN_BANDS = (0, 32, 256, 1024, 4096, math.inf)
BYTE_BANDS = (0, 64 * 2**10, 2**20, 16 * 2**20, 64 * 2**20, math.inf)


def _num(row: dict, col: str) -> int:
    v = row.get(col)
    if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
        raise SimcastInputError(col, None, f"is required for kind {row.get('kind')!r}")
    return int(float(v))


def _opt(row: dict, col: str) -> int:
    """An optional whole-number column's value, 0 when absent or empty (``v_head_dim``: the values' head size,
    empty = ``head_dim``; :mod:`simcast.cost.kernels.diff_kv`)."""
    v = row.get(col)
    return 0 if v is None or v == "" or pd.isna(v) else int(float(v))


def _dtype(row: dict) -> str:
    v = row.get("dtype")
    return "bf16" if v is None or (isinstance(v, float) and math.isnan(v)) or v == "" else str(v)


def row_engine(row: dict, default: str | None = None) -> str | None:
    """The row's ``engine`` column (empty -> ``default``), checked."""
    from simcast.cost.kernels.engine_cost import check_engine

    v = row.get("engine")
    if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
        return check_engine(default)
    return check_engine(str(v), "engine")


def predict_row(
    row: dict, dev: DeviceSpec, model: Callable[[str], ModelSpec] | None = None, engine: str | None = None
) -> tuple[kernels.KernelPrediction, str]:
    """Predict one generic row on ``dev``; raises :class:`SimcastInputError` when it cannot.

    ``engine`` is the default for rows without an ``engine`` column value.
    """
    kind, dt = row.get("kind"), _dtype(row)
    eng = row_engine(row, engine)
    if kind == "gemm":
        return kernels.gemm(dev, _num(row, "m"), _num(row, "n"), _num(row, "k"), dt, engine=eng), ""
    if kind in ("attention_prefill", "attention_decode"):
        return kernels.attention(
            dev,
            kind.split("_")[1],
            _num(row, "batch"),
            _num(row, "q_len"),
            _num(row, "kv_len"),
            _num(row, "heads"),
            _num(row, "kv_heads"),
            _num(row, "head_dim"),
            dt,
            engine=eng,
            v_head_dim=_opt(row, "v_head_dim"),
        ), ""
    if kind in ("allreduce", "allgather"):
        nodes = 1 if row.get("nodes") is None or pd.isna(row.get("nodes")) else _num(row, "nodes")
        return kernels.collective(dev, kind, float(_num(row, "bytes")), _num(row, "gpus"), nodes, engine=eng), ""
    if kind == "p2p":
        nodes = 1 if row.get("nodes") is None or pd.isna(row.get("nodes")) else _num(row, "nodes")
        return kernels.p2p(dev, float(_num(row, "bytes")), cross_node=nodes > 1), ""
    if kind in ("rms_norm", "add", "silu_and_mul"):
        return kernels.elementwise(dev, kind, _num(row, "m"), _num(row, "n"), dt), ""
    if kind == "rope":
        d = _num(row, "head_dim")
        return kernels.elementwise(
            dev, "rope", _num(row, "m"), _num(row, "heads") * d, dt, k_width=_num(row, "kv_heads") * d
        ), ""
    if kind == "layer":
        name = row.get("model")
        if not isinstance(name, str) or not name or model is None:
            raise SimcastInputError("model", name, "a layer row needs a model column (e.g. meta-llama/Llama-2-7b-hf)")
        return kernels.layer(dev, model(name), _num(row, "batch"), _num(row, "gpus"), dt), ""
    raise SimcastInputError(
        "kind",
        kind,
        "allowed: gemm, attention_prefill, attention_decode, allreduce, allgather, "
        "p2p, layer, rms_norm, add, silu_and_mul, rope",
    )


def predict_frame(
    df: pd.DataFrame,
    device: str | DeviceSpec | None = None,
    load_device: Callable[[str], DeviceSpec] | None = None,
    engine: str | None = None,
) -> pd.DataFrame:
    """``df`` plus ``predicted_s``, ``bound``, ``kernel_model``, ``reason`` and ``abs_err_pct`` per row.

    ``engine``: the default for rows without an ``engine`` value.
    """
    from simcast.inputs.loaders import load_device as _load_device
    from simcast.inputs.loaders import load_model, shipped_models, shipped_profile_path

    def column_device(name: str) -> DeviceSpec:  # a CSV cell names a shipped profile, never a file to open
        return _load_device(str(shipped_profile_path(name, "device")))

    load = load_device or (_load_device if device is not None else column_device)
    devices: dict[str, Any] = {}
    models: dict[str, ModelSpec] = {}

    def dev_for(row: dict) -> DeviceSpec:
        name = device if device is not None else row.get("device")
        if isinstance(name, DeviceSpec):
            return name
        if not isinstance(name, str) or not name:
            raise SimcastInputError("device", name, "give a device column or --device")
        if name not in devices:
            try:
                devices[name] = load(name)
            except SimcastInputError as e:
                devices[name] = e
        if isinstance(devices[name], Exception):
            raise devices[name]
        return devices[name]

    def model(name: str) -> ModelSpec:
        if name not in models:
            require(name in shipped_models(), "model", name, f"not a shipped model ({', '.join(shipped_models())})")
            models[name] = load_model(name)
        return models[name]

    pred: list[float | None] = []
    bound: list[str] = []
    reason: list[str] = []
    how: list[str] = []
    for row in df.to_dict("records"):
        try:
            p, _ = predict_row(row, dev_for(row), model, engine)
            pred.append(p.time_s)
            bound.append(p.bound)
            how.append(p.kernel_model)
            reason.append("")
        except SimcastInputError as e:
            pred.append(None)
            bound.append("")
            how.append("")
            reason.append(str(e))
    out = df.copy()
    out["predicted_s"] = pred
    out["bound"] = bound
    out["kernel_model"] = how
    out["reason"] = reason
    meas = pd.to_numeric(out["time_s"], errors="coerce") if "time_s" in out else np.nan
    out["abs_err_pct"] = (pd.to_numeric(out["predicted_s"], errors="coerce") / meas - 1.0).abs() * 100.0
    return out


def size_band(row: dict) -> str:
    """Message-size band for network rows, token band for compute rows."""

    def fmt_bytes(b: float) -> str:
        return "inf" if b == math.inf else (f"{b // 2**20}M" if b >= 2**20 else f"{b // 2**10}K")

    def fmt_tokens(b: float) -> str:
        return "inf" if b == math.inf else str(int(b))

    if row.get("kind") in NETWORK_KINDS:
        v, edges, fmt = row.get("bytes"), BYTE_BANDS, fmt_bytes
    else:
        v = row.get("m") if row.get("kind") != "layer" else row.get("batch")
        if row.get("kind", "").startswith("attention"):
            v = (row.get("batch") or 0) * (row.get("q_len") or 0)
        edges, fmt = TOKEN_BANDS, fmt_tokens
    if v is None or pd.isna(v):
        return "-"
    for lo, hi in zip(edges, edges[1:]):
        if lo < float(v) <= hi:
            return f"({fmt(lo)}, {fmt(hi)}]"
    return "-"


def error_table(pred: pd.DataFrame, by: tuple[str, ...] = ("kind",)) -> pd.DataFrame:
    """Rows, median and p90 absolute % error per group (unpredicted rows counted separately)."""
    df = pred.copy()
    if "band" in by and "band" not in df:
        df["band"] = [size_band(r) for r in df.to_dict("records")]
    keys = [c for c in by if c in df]
    out = []
    for key, g in df.groupby(keys, dropna=False, sort=True):
        e = g["abs_err_pct"].dropna()
        key = key if isinstance(key, tuple) else (key,)
        out.append(
            {
                **dict(zip(keys, key)),
                "rows": len(g),
                "unpredicted": int(g["predicted_s"].isna().sum()),
                "median_abs_err_pct": float(np.median(e)) if len(e) else float("nan"),
                "p90_abs_err_pct": float(np.percentile(e, 90)) if len(e) else float("nan"),
            }
        )
    return pd.DataFrame(out)


# Numeric columns of the generic schema: (lowest, highest, whole number). Empty cells are allowed
# (a kind uses only some columns); every other cell must be a finite number in range.
COLUMN_BOUNDS: dict[str, tuple[float, float, bool]] = {
    **{c: (1, MAX_GEMM_DIM, True) for c in ("m", "n", "k")},
    "batch": (1, MAX_REQUESTS, True),
    "q_len": (1, MAX_TOKENS, True),
    "kv_len": (1, MAX_TOKENS, True),
    "heads": (1, MAX_HEADS, True),
    "kv_heads": (1, MAX_HEADS, True),
    "head_dim": (1, MAX_HEAD_DIM, True),
    "v_head_dim": (1, MAX_HEAD_DIM, True),
    "gpus": (1, MAX_DEVICES, True),
    "nodes": (1, MAX_DEVICES, True),
}
MAX_TIME_S = 1e6
"""A measured kernel time, seconds (11.6 days): anything longer is a unit mistake."""
MIN_TIME_S = 1e-9
"""The shortest measured kernel time read, seconds (1 ns; GPU timers resolve ~1 us): shorter is a unit mistake."""


def check_measured(df: pd.DataFrame, field: str) -> pd.DataFrame:
    """``df`` (generic schema, text or numbers) with every numeric cell checked and converted.

    ``time_s`` is required on every row: a finite number of seconds in ``[MIN_TIME_S, MAX_TIME_S]``;
    ``bytes`` in ``(0, MAX_MESSAGE_BYTES]``; the other numeric columns are whole numbers in
    :data:`COLUMN_BOUNDS`. The first bad cell raises, naming its column and CSV line.
    """
    missing = [c for c in ("kind", "time_s") if c not in df]
    require(not missing, field, ",".join(missing), f"missing columns; the schema is {','.join(GENERIC_COLUMNS)}")
    out = df.copy()
    out["time_s"] = numeric_column(df, "time_s", field, required=True, lo=MIN_TIME_S, hi=MAX_TIME_S)
    if "bytes" in df:
        out["bytes"] = numeric_column(df, "bytes", field, lo=0.0, lo_open=True, hi=MAX_MESSAGE_BYTES)
    for col, (lo, hi, whole) in COLUMN_BOUNDS.items():
        if col in df:
            out[col] = numeric_column(df, col, field, lo=lo, hi=hi, integer=whole)
    return out


FIT_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k"),
    "rms_norm": ("m", "n"),
    "add": ("m", "n"),
    "silu_and_mul": ("m", "n"),
    "rope": ("m", "heads", "kv_heads", "head_dim"),
    "p2p": ("bytes",),
    "allreduce": ("bytes", "gpus"),
    "allgather": ("bytes", "gpus"),
}
"""The columns ``simcast calibrate`` needs on the rows of each kind it fits (validate reports such a row as
unpredicted instead)."""


def check_fit_columns(df: pd.DataFrame, field: str) -> pd.DataFrame:
    """``df`` (from :func:`read_measured`) unchanged if every row of a kind that calibrate fits has the
    columns that kind needs; else one error naming the column and line. A collective needs >= 2 GPUs."""
    for kind, cols in FIT_COLUMNS.items():
        rows = df["kind"] == kind
        if not rows.any():
            continue
        for c in cols:
            require(c in df, f"{field}: column {c}", None, f"is required on {kind} rows")
            lo = 2 if c == "gpus" else 0
            numeric_column(df, c, field, required=True, where=rows, lo=lo, lo_open=c == "bytes")
    return df


def with_generic_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every generic column present (absent ones empty, e.g. a GEMM-only CSV has no ``nodes``)
    and an empty ``dtype`` read as bf16, the schema's default (as :func:`predict_row` does)."""
    out = df.reindex(columns=list(dict.fromkeys([*df.columns, *GENERIC_COLUMNS])))
    out["dtype"] = out["dtype"].where(out["dtype"].notna() & (out["dtype"] != ""), "bf16")
    return out


def read_measured(path: str | Path) -> pd.DataFrame:
    """A measured CSV in the generic schema, or a Vidur profiling file as it is, through the checked loader."""
    from simcast.calib.readers.vidur import is_vidur_file, read_vidur

    p = Path(path)
    field = f"measured {p.name}"
    df = read_vidur(p) if is_vidur_file(p) and p.is_file() else load_csv(p, "measured")
    return check_measured(df, field)

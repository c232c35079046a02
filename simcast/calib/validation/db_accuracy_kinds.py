"""Accuracy of the issue-27 kernel kinds simcast costs without an engine fit: gated-DeltaNet / KDA linear
attention and sliding-window attention, against the measured-kernel database.

Tables (aiconfigurator-core, per system): ``linear_attention/<engine>/<v>/gdn_perf`` (Qwen3.5 GDN layers:
``causal_conv1d_fn`` / ``chunk_gated_delta_rule`` for prefill rows, ``causal_conv1d_update`` /
``fused_recurrent_gated_delta_rule*`` for decode rows), ``kda/<engine>/<v>/kda_perf`` (Kimi Delta Attention:
the same conv and a chunked / recurrent delta rule with a per-channel decay; a ``verify`` phase of 2-8 query
tokens) and the attention tables' rows with ``window_size > 0`` (sliding-window attention; the tables carry
no attention-sink dimension). Each row is one kernel launch; its prediction is simcast's own op formula
(:mod:`simcast.cost.ops.linear_attention`, :func:`simcast.cost.ops.attention_ops.attention_sliding`) for one
layer on one rank at the row's shape, timed by the device's roofline (:func:`simcast.cost.ops.compute.roofline`),
as the simulator times these ops with or without ``--engine`` (no engine has a fitted kernel for them).
simcast has no KDA model: KDA rows are costed as the gated delta rule at the same heads and head sizes
(labelled a transfer in the docs).

Split: :func:`simcast.calib.readers.db_split.held_out` (CRC32 of the shape, odd = held out), the same as every
other database table. Reserved folders are never opened (:func:`simcast.calib.readers.aic_db.guard`); in
addition the h100_sxm / h200_sxm ``linear_attention/vllm/0.24.0`` tables are left out
(:data:`EXCLUDED`), being the reserved vLLM 0.24 attention measurements' sibling collection.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcast.calib.readers import aic_db
from simcast.calib.readers.db_split import held_out, newest
from simcast.core.device import DeviceSpec
from simcast.core.specs import Batch
from simcast.cost.ops import attention_ops
from simcast.cost.ops import linear_attention as la
from simcast.cost.ops.compute import engine_roofline, roofline
from simcast.cost.ops.op_work import CostContext
from simcast.engines import get_engine
from simcast.trace.ir import OpRecord, TensorArg

EXCLUDED: frozenset[tuple[str, str, str, str]] = frozenset(
    (s, "linear_attention", "vllm", "0.24.0") for s in ("h100_sxm", "h200_sxm")
)
"""Folders not read although the reader's guard allows them: kept out with the reserved vLLM 0.24 tables."""

LINEAR_TABLES = {"gdn": ("linear_attention", "gdn_perf"), "kda": ("kda", "kda_perf")}
"""Linear-attention kind -> (database kind folder, table)."""

PHASES = {"context": "prefill", "generation": "decode", "verify": "verify"}
"""The database's ``phase`` -> simcast's name (verify: a speculative-decoding verify step of 2-8 tokens)."""

_LENS = TensorArg(shape=("R",), dtype="int32")


def _ctx(batch: Batch, dev: DeviceSpec) -> CostContext:
    return CostContext(batch=batch, device=dev, tp_path=None)  # type: ignore[arg-type]  # no collective here


def linear_records(hk: int, dk: int, hv: int, dv: int, taps: int) -> tuple[OpRecord, OpRecord]:
    """The traced ``gated_delta_rule`` and ``causal_conv1d`` of one linear-attention layer on one rank
    (bf16 activations; the conv runs over q, k and v: ``2·hk·dk + hv·dv`` channels), as
    :class:`simcast.trace.linear_attention.GatedDeltaNet` records them."""
    qk = TensorArg(shape=("T", str(hk * dk)), dtype="bf16")
    v = TensorArg(shape=("T", str(hv * dv)), dtype="bf16")
    rule = OpRecord(op="simcast::gated_delta_rule", args=(qk, qk, v, _LENS, _LENS, dk, dv), outputs=(v,), scope="l")
    c = 2 * hk * dk + hv * dv
    x = TensorArg(shape=("T", str(c)), dtype="bf16")
    w = TensorArg(shape=(str(c), str(taps)), dtype="bf16")
    conv = OpRecord(op="simcast::causal_conv1d", args=(x, w, _LENS, _LENS), outputs=(x,), scope="l")
    return rule, conv


def linear_rows(system: str, engine: str, kind: str) -> pd.DataFrame:
    """One engine's newest ``gdn`` / ``kda`` table of ``system`` in a flat frame (empty when absent)."""
    folder, table = LINEAR_TABLES[kind]
    v = newest(system, folder, engine, table)
    if v is None or (system, folder, engine, v) in EXCLUDED:
        return pd.DataFrame()
    df = aic_db.read_table(system, folder, engine, v, table)
    df = df[df["phase"].isin(PHASES)]
    conv = df["kernel_source"].str.contains("conv1d")
    return pd.DataFrame(
        {
            "kind": np.where(conv, f"{kind}_conv", f"{kind}_rule"),
            "phase": df["phase"].map(PHASES),
            "op": df["kernel_source"].astype(str),
            "batch": df["batch_size"].astype(int),
            "q_len": np.where(df["phase"] == "generation", 1, df["seq_len"]).astype(int),
            "heads": df["num_v_heads"].astype(int),
            "kv_heads": df["num_k_heads"].astype(int),
            "head_dim": df["head_k_dim"].astype(int),
            "v_head_dim": df["head_v_dim"].astype(int),
            "taps": df["d_conv"].astype(int),
            "time_s": df["latency"].astype(float) * 1e-3,
            "engine": engine,
            "source": f"{system}/{folder}/{engine}/{v}/{table}",
        }
    ).reset_index(drop=True)


def predict_linear(rows: pd.DataFrame, dev: DeviceSpec) -> np.ndarray:
    """Seconds simcast gives each row's kernel (rule or conv) on ``dev``: fresh requests (no prior state
    read for a prefill row's context: the database's rows start at position 0), ``batch`` of ``q_len``."""
    out = np.empty(len(rows))
    for i, r in enumerate(rows.to_dict("records")):
        rule, conv = linear_records(r["kv_heads"], r["head_dim"], r["heads"], r["v_head_dim"], r["taps"])
        ctx = _ctx(Batch(query_lens=(r["q_len"],), context_lens=(0,), counts=(r["batch"],)), dev)
        is_conv = r["kind"].endswith("_conv")
        work = la.causal_conv1d(conv, ctx) if is_conv else la.gated_delta_rule(rule, ctx)
        out[i] = roofline(work, dev, "bf16")[0]
    return out


def window_rows(system: str, engine: str) -> pd.DataFrame:
    """The newest attention tables' sliding-window rows (``window_size > 0``, beam 1, 16-bit or fp8 KV)."""
    out = []
    for table, phase in (("context_attention_perf", "prefill"), ("generation_attention_perf", "decode")):
        v = newest(system, "attention", engine, table)
        if v is None:
            continue
        df = aic_db.read_table(system, "attention", engine, v, table)
        if "window_size" not in df:
            continue
        df = df[(df["window_size"] > 0) & (df.get("beam_width", 1) == 1)]
        df = df[df["kv_cache_dtype"].isin(("bfloat16", "float16", "fp8"))]
        step = df["step"].astype(int)
        q = df["isl"].astype(int) if phase == "prefill" else pd.Series(1, index=df.index)
        ctx = step if phase == "prefill" else get_engine(engine).decode_kv_len(step) - 1
        out.append(
            pd.DataFrame(
                {
                    "kind": "sliding",
                    "phase": phase,
                    "op": df["kernel_source"].astype(str),
                    "dtype": np.where(df["kv_cache_dtype"] == "fp8", "fp8", "bf16"),
                    "window": df["window_size"].astype(int),
                    "batch": df["batch_size"].astype(int),
                    "q_len": q,
                    "kv_len": q + ctx,
                    "heads": df["num_heads"].astype(int),
                    "kv_heads": df["num_key_value_heads"].astype(int),
                    "head_dim": df["head_dim"].astype(int),
                    "time_s": df["latency"].astype(float) * 1e-3,
                    "engine": engine,
                    "source": f"{system}/attention/{engine}/{v}/{table}",
                }
            )
        )
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def sliding_record(heads: int, kv_heads: int, head_dim: int, window: int, dtype: str) -> OpRecord:
    """The traced ``attention_sliding`` op of one layer on one rank (bf16 queries, ``dtype`` cache)."""
    q = TensorArg(shape=("T", str(heads * head_dim)), dtype="bf16")
    kc = TensorArg(shape=("S", str(kv_heads), str(head_dim)), dtype="fp8" if dtype == "fp8" else "bf16")
    return OpRecord(
        op="simcast::attention_sliding", args=(q, kc, kc, _LENS, _LENS, 1.0, window), outputs=(q,), scope="l"
    )


def predict_window(rows: pd.DataFrame, dev: DeviceSpec, engine: str | None = None) -> np.ndarray:
    """Seconds simcast gives each sliding-window row on ``dev``: its ``attention_sliding`` op on the roofline
    (``engine`` None) or as ``--engine`` times it (the engine's fitted full-attention kernel on the
    window-capped requests, :func:`simcast.cost.ops.attention_ops.window_batch`)."""
    out = np.empty(len(rows))
    for i, r in enumerate(rows.to_dict("records")):
        rec = sliding_record(r["heads"], r["kv_heads"], r["head_dim"], r["window"], r["dtype"])
        batch = Batch(query_lens=(r["q_len"],), context_lens=(r["kv_len"] - r["q_len"],), counts=(r["batch"],))
        kv = 1.0 if r["dtype"] == "fp8" else 0.0
        ctx = CostContext(batch=batch, device=dev, tp_path=None, engine=engine, kv_bytes=kv)  # type: ignore[arg-type]
        work = attention_ops.attention_sliding(rec, ctx)
        out[i] = (engine_roofline(rec, work, ctx, "bf16") if engine else roofline(work, dev, "bf16"))[0]
    return out


def summary(rows: pd.DataFrame, pred: np.ndarray, by: list[str]) -> pd.DataFrame:
    """Rows, median and p90 absolute % error per group of ``by``."""
    e = rows.assign(abs_err_pct=np.abs(pred / rows["time_s"].to_numpy() - 1) * 100)
    g = e.groupby(by, sort=True)["abs_err_pct"]
    return pd.DataFrame(
        {"rows": g.size(), "median_abs_err_pct": g.median(), "p90_abs_err_pct": g.quantile(0.9)}
    ).reset_index()


def held_out_linear(system: str, dev: DeviceSpec, engines: tuple[str, ...], kind: str) -> pd.DataFrame:
    """Held-out (odd-half) error per engine, phase and kernel (rule / conv) of ``kind`` on ``system``."""
    parts = []
    for e in engines:
        rows = linear_rows(system, e, kind)
        if len(rows):
            test = rows[held_out(rows)].reset_index(drop=True)
            parts.append(summary(test, predict_linear(test, dev), ["source", "engine", "phase", "kind"]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def held_out_window(system: str, dev: DeviceSpec, engines: tuple[str, ...]) -> pd.DataFrame:
    """Held-out (odd-half) error of the sliding-window rows per engine, phase and window class, with the
    roofline (``model`` = "roofline") and with the engine's kernels (``model`` = "engine")."""
    parts = []
    for e in engines:
        rows = window_rows(system, e)
        if len(rows):
            test = rows[held_out(rows)].reset_index(drop=True)
            test = test.assign(windows=np.where(test["window"] == 128, "128", ">= 512"))
            for model, eng in (("roofline", None), ("engine", e)):
                got = summary(test, predict_window(test, dev, eng), ["engine", "phase", "windows"])
                parts.append(got.assign(model=model, source=test["source"].iloc[0].rsplit("/", 1)[0]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

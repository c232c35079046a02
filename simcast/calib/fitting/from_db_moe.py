"""MoE kernels from the aiconfigurator-core database: routed-expert (fused MoE) and DeepEP all-to-all
rows, and the fits of :mod:`simcast.cost.kernels.moe_kernels` on them.

Every system's MoE tables are read, h100_sxm and h200_sxm included: the reservation covers only
their ``gemm/vllm/0.24.0``, ``attention/vllm/0.24.0`` and NCCL 2.29.2 folders, which
:func:`simcast.calib.readers.aic_db.guard` refuses on every read (MoE and DeepEP tables live under ``moe/``
and ``comm/<engine>/``, never there). Table semantics, from the collectors
(ai-dynamo/aiconfigurator ``collector/vllm/collect_moe.py``, ``collector/deep_collector``):

* ``moe_perf``: one rank's ``fused_experts`` call on ``num_tokens`` tokens routed top-k over
  ``num_experts`` (EP: only the rank's ``num_experts / ep`` experts are computed, ``inter_size /
  moe_tp`` columns each); ``balanced`` rows give every expert ``num_tokens·topk / num_experts`` tokens.
  ``latency`` in ms.
* ``moe_a2a_perf`` (vLLM, TensorRT-LLM): DeepEP ``dispatch`` / ``combine`` of ``num_tokens`` tokens
  per rank at ``ep_size`` ranks in one node, high-throughput (``*_ht``: DeepEP normal mode) or
  low-latency (``*_ll``); ``latency`` in microseconds. SGLang's ``wideep_deepep_{ll,normal}_perf``
  hold the same for SGLang's DeepEP (times in ``*_us`` columns; 8 ranks per node).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcast.calib.fitting import fit_collectives as fc
from simcast.calib.fitting import fit_kernels as fk
from simcast.calib.readers import aic_db
from simcast.calib.readers.db_split import errors, held_out, newest, version_key
from simcast.core import kernel_fits
from simcast.core.device import DeviceSpec
from simcast.core.kernel_fits import AllToAllFit, MoeFit
from simcast.cost.kernels import moe_kernels as mk
from simcast.engines import get_engine

MOE_DTYPES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "w4a16_mxfp4": "mxfp4", "nvfp4": "nvfp4"}
A2A_MODES = {
    "deepep_ht": "normal",
    "deepep_ll": "low_latency",
    "trtllm_deepep_ht": "normal",
    "trtllm_deepep_ll": "low_latency",
}
DEEPEP_SMS = 20
"""DeepEP normal mode's default SM count (``deep_ep.Buffer.num_sms = 20``); rows at other counts are tuning sweeps."""


def moe_rows(system: str, engine: str, version: str) -> pd.DataFrame:
    """Balanced-routing rows of one engine's ``moe_perf`` with the per-rank work the fit needs."""
    df = aic_db.read_table(system, "moe", engine, version, "moe_perf")
    df = df[(df["distribution"] == "balanced") & df["moe_dtype"].isin(MOE_DTYPES)]
    n, k, e = (df[c].astype(float) for c in ("num_tokens", "topk", "num_experts"))
    ep, tp = df["moe_ep_size"].astype(float), df["moe_tp_size"].astype(float)
    return pd.DataFrame(
        {
            "kind": "moe",
            "engine": engine,
            "dtype": df["moe_dtype"].map(MOE_DTYPES),
            "tokens": n.astype(int),
            "hidden": df["hidden_size"].astype(int),
            "inter": df["inter_size"].astype(int),
            "topk": k.astype(int),
            "experts": e.astype(int),
            "tp": tp.astype(int),
            "ep": ep.astype(int),
            "pairs": n * k / ep,  # balanced: every expert gets n·k/E tokens; the rank holds E/ep experts
            "active": np.maximum(1.0, np.minimum(e / ep, np.ceil(n * k / ep))),
            "i": df["inter_size"].astype(float) / tp,
            "time_s": df["latency"].astype(float) * 1e-3,
            "op": df["kernel_source"].astype(str),
            "source": f"{system}/moe/{engine}/{version}/moe_perf",
        }
    ).reset_index(drop=True)


def a2a_rows(system: str, engine: str, version: str) -> pd.DataFrame:
    """DeepEP dispatch/combine rows (16-bit payloads, one node) with the bytes one rank sends."""
    out = []
    deepep = get_engine(engine).a2a_deepep_tables  # SGLang's own DeepEP tables, else the engine's moe_a2a_perf
    if deepep:
        for table, mode in deepep:
            df = aic_db.read_table(system, "comm", engine, version, table)
            df = df[df["node_num"] == 1]
            for phase in ("dispatch", "combine"):
                if mode == "normal":
                    d = df[df[f"{phase}_sms"] == DEEPEP_SMS]
                    t = d[f"{phase}_transmit_us"] + d[f"{phase}_notify_us"]
                else:
                    d, t = df, df[f"{phase}_avg_t_us"]
                out.append(_a2a_frame(system, engine, version, table, d, mode, phase, 8, "num_token", "num_topk", t))
    else:
        df = aic_db.read_table(system, "comm", engine, version, "moe_a2a_perf")
        df = df[df["comm_backend"].isin(A2A_MODES) & df["comm_dtype"].isin(("default", "bfloat16"))]
        df = df[df["node_num"] == 1]
        if (df["sms"] == DEEPEP_SMS).any():  # normal mode at DeepEP's default SM count (low latency uses none)
            df = df[(df["sms"] == DEEPEP_SMS) | df["comm_backend"].str.endswith("_ll")]
        for (backend, phase), d in df.groupby(["comm_backend", "phase"]):
            ep = int(d["ep_size"].iloc[0])
            out.append(
                _a2a_frame(
                    system,
                    engine,
                    version,
                    "moe_a2a_perf",
                    d,
                    A2A_MODES[backend],
                    phase,
                    ep,
                    "num_tokens",
                    "topk",
                    d["latency"],
                )
            )
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _a2a_frame(system, engine, version, table, d, mode, phase, ep, tok, topk, t_us) -> pd.DataFrame:
    nbytes = [
        float(mk.a2a_bytes(n, int(k), int(e), ep, h))
        for n, k, e, h in zip(d[tok], d[topk], d["num_experts"], d["hidden_size"])
    ]
    return pd.DataFrame(
        {
            "kind": "a2a",
            "engine": engine,
            "mode": mode,
            "phase": phase,
            "tokens": d[tok].astype(int).to_numpy(),
            "hidden": d["hidden_size"].astype(int).to_numpy(),
            "topk": d[topk].astype(int).to_numpy(),
            "experts": d["num_experts"].astype(int).to_numpy(),
            "ep": ep,
            "bytes": nbytes,
            "time_s": np.asarray(t_us, dtype=float) * 1e-6,
            "source": f"{system}/comm/{engine}/{version}/{table}",
        }
    )


# ------------------------------------------------------------------ fits
_MOE = {
    "matmul": (0.6, 0.05, 1.0),
    "half_rows": (32.0, 0.0, 1e5),
    "half_n": (64.0, 0.0, 1e5),
    "half_k": (64.0, 0.0, 1e5),
    "memory": (0.7, 0.05, 1.0),
    "smooth_p": (3.0, 1.0, 20.0),
    "launch_s": (2e-5, 0.0, 1e-3),
    "routed_pair_s": (1e-9, 0.0, 1e-6),
}


BLOCK_M = (16, 32, 64, 128)
"""Grouped-GEMM M tiles tried (vLLM's fused_moe ``BLOCK_SIZE_M`` configs, DeepGEMM/CUTLASS grouped tiles):
the one with the least error on the fitting half is kept, as a kernel choice, not a fitted number."""


def fit_moe(rows: pd.DataFrame, dev: DeviceSpec, dtype: str, sm_count: int = 0) -> tuple[MoeFit, float]:
    """A :class:`MoeFit` on ``moe`` rows of expert format ``dtype``; (fit, median abs % error).

    With ``sm_count`` the saturation form and the tile/wave form at each of :data:`BLOCK_M` are fitted and
    the one with the least mean abs log error on these rows is kept (the form is a choice the data makes);
    without it, the saturation form.
    """
    r = rows[rows["dtype"] == dtype]
    if not len(r):
        raise ValueError(f"no moe rows of dtype {dtype}")
    peak, bw = dev.matmul_peak(mk.PEAK_DTYPE[dtype]), dev.hbm_bw_bytes_per_s
    a = {c: r[c].to_numpy(float) for c in ("pairs", "active", "i", "hidden", "time_s")}
    a["routed"] = (r["tokens"] * r["topk"]).to_numpy(float)
    best: tuple[MoeFit, float, float] | None = None
    for block_m in (0, *BLOCK_M) if sm_count else (0,):

        def make(p: dict[str, float], bm: int = block_m) -> MoeFit:
            q = {"half_rows": 0.0, **p}
            return MoeFit(
                dtype=dtype,
                block_m=bm,
                sm_count=sm_count if bm else 0,
                matmul=q["matmul"],
                half_rows=q["half_rows"],
                half_n=q["half_n"],
                half_k=q["half_k"],
                memory=q["memory"],
                smooth_p=q["smooth_p"],
                launch_s=q["launch_s"],
                routed_pair_s=q["routed_pair_s"],
            )

        spec = {k: v for k, v in _MOE.items() if not (block_m and k == "half_rows")}
        params, err = fk._fit(
            spec,
            lambda p: mk.moe_time_s(
                make(p), peak, bw, a["pairs"], a["active"], a["i"], a["hidden"], routed_pairs=a["routed"]
            ),
            a["time_s"],
            starts=[{"launch_s": float(np.min(a["time_s"])) * 0.8, "smooth_p": 8.0}],
        )
        fit = make(params)
        pred = mk.moe_time_s(fit, peak, bw, a["pairs"], a["active"], a["i"], a["hidden"], routed_pairs=a["routed"])
        cost = float(np.mean(np.abs(np.log(pred / a["time_s"]))))
        if best is None or cost < best[2]:
            best = (fit, err, cost)
    assert best is not None
    return best[0], best[1]


def fit_a2a(rows: pd.DataFrame, mode: str, phase: str) -> AllToAllFit:
    """``latency + bytes / bw`` on one mode's and phase's rows (robust, in log space)."""
    r = rows[(rows["mode"] == mode) & (rows["phase"] == phase)]
    lat, bw = fc.fit_line(r["bytes"].to_numpy(float), r["time_s"].to_numpy(float), 1.0)
    return AllToAllFit(mode=mode, phase=phase, latency_s=lat, bw_bytes_per_s=bw, ep=int(r["ep"].iloc[0]))


def predict_moe(fit: MoeFit, rows: pd.DataFrame, dev: DeviceSpec) -> np.ndarray:
    peak = dev.matmul_peak(mk.PEAK_DTYPE[fit.dtype])
    return np.asarray(
        mk.moe_time_s(
            fit,
            peak,
            dev.hbm_bw_bytes_per_s,
            rows["pairs"],
            rows["active"],
            rows["i"],
            rows["hidden"],
            routed_pairs=rows["tokens"] * rows["topk"],
        )
    )


# ------------------------------------------------------------------ one engine on one system
def _main_kernel(rows: pd.DataFrame) -> pd.DataFrame:
    """Per expert format, the kernel with most rows (the engine's default path on that GPU)."""
    out = [g[g["op"] == g["op"].value_counts().idxmax()] for _, g in rows.groupby("dtype")]
    return pd.concat(out, ignore_index=True) if out else rows


def _versions_newest_first(system: str, kind: str, engine: str, table: str) -> list[str]:
    root = aic_db.data_root()
    vs = [
        v
        for v in aic_db.versions(system, kind, engine)
        if (root / system / kind / engine / v / f"{table}.parquet").is_file()
    ]
    return sorted(vs, key=version_key, reverse=True)


def moe_engine_data(system: str, engine: str) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    """(moe rows, all-to-all rows, tables) of one engine on ``system`` (every read passes the reserved-table guard)."""
    tables: list[str] = []
    moe = pd.DataFrame()
    for v in _versions_newest_first(system, "moe", engine, "moe_perf"):  # some hold power-law rows only
        rows = moe_rows(system, engine, v)
        if len(rows):
            moe = _main_kernel(rows)
            tables.append(f"{system}/moe/{engine}/{v}/moe_perf (balanced routing, main kernel per format)")
            break
    a2a = pd.DataFrame()
    eng = get_engine(engine)
    av = newest(system, "comm", engine, eng.a2a_table)
    if av:
        a2a = a2a_rows(system, engine, av)
        name = eng.a2a_table_label
        tables.append(f"{system}/comm/{engine}/{av}/{name} (16-bit payloads, one node)")
    return moe, a2a, tuple(tables)


def fit_moe_engine(
    system: str, engine: str, dev: DeviceSpec, sm_count: int = 0
) -> tuple[tuple[MoeFit, ...], tuple[AllToAllFit, ...], dict[str, tuple[float, float]], tuple[str, ...]]:
    """MoE and all-to-all fits on the fitting half; ({kind: (median, p90) held-out % error}, tables).

    ``sm_count``: the system's SMs, for the tile/wave form of the grouped GEMMs (0: the saturation form)."""
    moe, a2a, tables = moe_engine_data(system, engine)
    fits: list[MoeFit] = []
    errs: dict[str, tuple[float, float]] = {}
    for fam in kernel_fits.MOE_DTYPES:
        rows = moe[moe["dtype"] == fam] if len(moe) else moe
        if len(rows) < 50:
            continue
        h = held_out(rows)
        f, _ = fit_moe(rows[~h], dev, fam, sm_count)
        errs[f"moe.{fam}"] = errors(predict_moe(f, rows[h], dev), rows[h]["time_s"])
        fits.append(f)
    a2a_fits: list[AllToAllFit] = []
    for mode in ("normal", "low_latency"):
        for phase in ("dispatch", "combine"):
            rows = a2a[(a2a["mode"] == mode) & (a2a["phase"] == phase)] if len(a2a) else a2a
            if len(rows) < 10:
                continue
            h = held_out(rows)
            af = fit_a2a(rows[~h], mode, phase)
            errs[f"a2a.{mode}.{phase}"] = errors(mk.a2a_time_s(af, rows[h]["bytes"]), rows[h]["time_s"])
            a2a_fits.append(af)
    return tuple(fits), tuple(a2a_fits), errs, tables

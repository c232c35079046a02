"""Held-out accuracy of the shipped profiles' engine kernels against the measured database.

The split is the one the profiles were fitted with (:func:`simcast.calib.fitting.from_db.held_out`:
a CRC32 of each row's shape; odd = held out). Predictions go through the simulator's own
per-row path (:func:`simcast.calib.validation.validate.predict_frame`), so a number here is what
``simcast validate`` prints for the same rows. Reserved tables are never read (the reader's
guard refuses them).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from simcast.calib.fitting.from_db import SYSTEMS, engine_data, held_out, newest
from simcast.calib.readers import aic_db
from simcast.calib.validation.validate import predict_frame
from simcast.core.device import DeviceSpec
from simcast.engines import ENGINES


def _summary(pred: pd.DataFrame, by: tuple[str, ...]) -> pd.DataFrame:
    out = []
    for key, g in pred.groupby(list(by), sort=True):
        e = g["abs_err_pct"].dropna()
        key = key if isinstance(key, tuple) else (key,)
        out.append(
            {
                **dict(zip(by, key)),
                "rows": len(g),
                "median_abs_err_pct": float(np.median(e)) if len(e) else float("nan"),
                "p90_abs_err_pct": float(np.percentile(e, 90)) if len(e) else float("nan"),
            }
        )
    return pd.DataFrame(out)


def engine_rows(system: str, engine: str) -> pd.DataFrame:
    """The rows one engine section was fitted/tested on (own tables or the named proxies)."""
    d = engine_data(system, engine)
    parts = [x for x in (d.gemm, d.attention, d.all_reduce) if len(x)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def held_out_errors(system: str, dev: DeviceSpec, engines: tuple[str, ...] = ENGINES) -> pd.DataFrame:
    """Median / p90 abs % error per engine, kernel kind and dtype on the held-out half."""
    out = []
    for e in engines:
        rows = engine_rows(system, e)
        if not len(rows):
            continue
        test = rows[held_out(rows)]
        p = predict_frame(test, dev)
        out.append(_summary(p.assign(engine=e), ("engine", "kind", "dtype")))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def nccl_errors(system: str, dev: DeviceSpec, held_out_only: bool = True) -> pd.DataFrame:
    """NCCL's own all-reduce (engine ``nccl``) against the system's non-reserved NCCL table."""
    v = newest(system, "comm", "nccl", "nccl_perf")
    if v is None:
        return pd.DataFrame()
    rows = aic_db.nccl_rows(system, v, dev.name, ("all_reduce",))
    if not len(rows):
        return pd.DataFrame()
    if held_out_only:
        rows = rows[held_out(rows)]
    p = predict_frame(rows, dev)
    return _summary(p.assign(engine="nccl", table=f"nccl/{v}"), ("engine", "table", "gpus"))


def cross_engine(system: str, dev: DeviceSpec, fit_engine: str, test_engine: str) -> pd.DataFrame:
    """Transfer check: predict ``test_engine``'s own tables with ``fit_engine``'s section (all rows)."""
    rows = []
    for kind, table in (("gemm", "gemm_perf"), ("attention", "context_attention_perf")):
        v = newest(system, kind, test_engine, table)
        if v is None:
            continue
        r = (
            aic_db.gemm_rows(system, test_engine, v, dev.name)
            if kind == "gemm"
            else aic_db.attention_rows(system, test_engine, v, dev.name)
        )
        rows.append(r)
    v = newest(system, "comm", test_engine, "custom_allreduce_perf")
    if v:
        rows.append(aic_db.custom_allreduce_rows(system, test_engine, v, dev.name))
    if not rows:
        return pd.DataFrame()
    r = pd.concat(rows, ignore_index=True).assign(engine=fit_engine)
    p = predict_frame(r, dev)
    return _summary(p.assign(case=f"{system}: {fit_engine} fit -> {test_engine} tables"), ("case", "kind", "dtype"))


def cross_device(src: DeviceSpec, dst: DeviceSpec, system: str, engines: tuple[str, ...] = ENGINES) -> pd.DataFrame:
    """Transfer check: ``src``'s engine fits on ``dst``'s peaks, against ``dst``'s tables (all rows)."""
    from simcast.calib.fitting.fit_kernels import transfer_engines

    dev = transfer_engines(src, dataclasses.replace(dst, engines={}), SYSTEMS[system].sm_count)
    out = []
    for e in engines:
        rows = engine_rows(system, e)
        if not len(rows):
            continue
        p = predict_frame(rows, dev)
        out.append(
            _summary(
                p.assign(case=f"{src.name} fit -> {system} ({dst.name} peaks)", engine=e),
                ("case", "engine", "kind", "dtype"),
            )
        )
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()

"""Held-out accuracy of the shipped profiles' MoE kernels (routed experts, DeepEP all-to-all).

Shapes: each table's rows split by the fitting CRC32 (:func:`simcast.calib.readers.db_split.held_out`); the
profiles were fitted on the even half, errors are on the odd half. Systems: one system's fits (B200)
on another system's own peaks and bandwidth against that system's tables, all rows. Reserved tables
are never read (:func:`simcast.calib.readers.aic_db.guard`); none of them is a MoE table.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from simcast.calib.fitting import from_db_moe as fm
from simcast.calib.readers.db_split import held_out
from simcast.core.device import DeviceSpec
from simcast.cost.kernels import moe_kernels as mk


def _errs(pred, meas) -> np.ndarray:
    return np.abs(np.asarray(pred, dtype=float) / np.asarray(meas, dtype=float) - 1) * 100


def _row(label: dict, e: np.ndarray) -> dict:
    return {
        **label,
        "rows": len(e),
        "median_abs_err_pct": float(np.median(e)) if len(e) else float("nan"),
        "p90_abs_err_pct": float(np.percentile(e, 90)) if len(e) else float("nan"),
    }


def moe_errors(system: str, dev: DeviceSpec, engine: str, all_rows: bool = False) -> list[dict]:
    """Error of ``dev``'s ``engine`` MoE fits on ``system``'s tables, per kind (held-out half).

    ``all_rows``: every row (a transfer from another system) instead of the held-out half.
    """
    fits = dev.engines.get(engine)
    if fits is None:
        return []
    moe, a2a, _ = fm.moe_engine_data(system, engine)
    out = []
    for fit in fits.moe:
        rows = moe[moe["dtype"] == fit.dtype] if len(moe) else moe
        rows = rows if all_rows or not len(rows) else rows[held_out(rows)]
        if len(rows):
            out.append(_row({"kind": f"experts {fit.dtype}"}, _errs(fm.predict_moe(fit, rows, dev), rows["time_s"])))
    for af in fits.all_to_all:
        rows = a2a[(a2a["mode"] == af.mode) & (a2a["phase"] == af.phase)] if len(a2a) else a2a
        rows = rows if all_rows or not len(rows) else rows[held_out(rows)]
        if len(rows):
            e = _errs(mk.a2a_time_s(af, rows["bytes"]), rows["time_s"])
            out.append(_row({"kind": f"all-to-all {af.mode} {af.phase}"}, e))
    return out


def held_out_table(devices: list[tuple[str, DeviceSpec]], engines: tuple[str, ...]) -> pd.DataFrame:
    """Shapes held out: every (system, engine, kind) with a fit."""
    out = []
    for system, dev in devices:
        for e in engines:
            out += [{"device": dev.name, "engine": e, **r} for r in moe_errors(system, dev, e)]
    return pd.DataFrame(out)


def transfer_table(src: DeviceSpec, targets: list[tuple[str, DeviceSpec]], engines: tuple[str, ...]) -> pd.DataFrame:
    """Systems held out: ``src``'s fits on each target's peaks and bandwidth, all of the target's rows."""
    out = []
    for system, dst in targets:
        dev = dataclasses.replace(dst, engines=src.engines)
        for e in engines:
            rows = moe_errors(system, dev, e, all_rows=True)
            out += [{"case": f"{src.name} fit -> {system} ({dst.name} peaks)", "engine": e, **r} for r in rows]
    return pd.DataFrame(out)

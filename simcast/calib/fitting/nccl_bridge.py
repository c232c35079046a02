"""NCCL's own all-reduce below 1 MiB from a system's own reduce-scatter and all-gather rows (the *bridge*).

H100 and H200 have no NCCL all-reduce table simcast may read, but their NCCL 2.23 tables
(``<system>/comm/nccl/2.23/nccl_perf``) time reduce-scatter and all-gather on their own fabric. Below 1 MiB
these collectives are latency-bound, and on every NVSwitch table of the database that times all three
(nccl-tests' ``message_size``: the all-reduce's buffer, reduce-scatter's input, all-gather's output, so one
size is one all-reduce's data), the all-reduce takes a nearly fixed share ``k`` of reduce-scatter +
all-gather per group size (0.55-0.61 at 2 GPUs, 0.63-0.68 at 4, 0.72-0.78 at 8 in aiconfigurator-core
0.12.0; its spread is printed by ``scripts/accuracy_db.py``). Assumption: that share holds on Hopper too
(A100's and Blackwell's bracket it). Above 1 MiB the share moves with NCCL's protocol and NVLS switches
(0.45-1.0 per size and version), so that band keeps the bandwidth-scaled transfer of
:mod:`simcast.calib.fitting.nccl_transfer`.

The shipped fit: derived rows (``k × (t_RS + t_AG)`` below 1 MiB, the transfer's times from 1 MiB up, at
the table's own sizes) fitted piecewise like a measured table. Its held-out check: each NVSwitch table
with all three collectives is predicted with ``k`` and the transfer's donor taken from the *other*
systems, fitted on the even half of its derived rows and judged on the odd half of its measured
all-reduce (:func:`check`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcast.calib.fitting import fit_collectives as fc
from simcast.calib.fitting import nccl_transfer as nt
from simcast.calib.readers import aic_db
from simcast.calib.readers.db_split import errors, held_out, version_key
from simcast.core.device import CollectiveFit

BRIDGE_MAX_BYTES = 2**20
"""Messages below this size (bytes) are derived from reduce-scatter + all-gather; larger ones transferred."""
DTYPE = "half"
"""The 16-bit sweep (engines all-reduce bf16 activations)."""
OPS = ("all_reduce", "reduce_scatter", "all_gather")


def _times(system: str, version: str, ops: tuple[str, ...]) -> pd.DataFrame:
    """Median time (s) per (gpus, bytes) and op name of one NCCL table's 16-bit rows; a column per op."""
    r = aic_db.nccl_rows(system, version, system, ops)
    r = r[r["dtype"] == DTYPE]
    return r.pivot_table(index=["gpus", "bytes"], columns="op", values="time_s", aggfunc="median").rename(
        columns=lambda c: str(c).removeprefix("nccl_")
    )


def sum_table(system: str) -> tuple[pd.DataFrame, str] | None:
    """(reduce-scatter + all-gather times per (gpus, bytes), version) of the newest non-reserved NCCL table
    of ``system`` that times both, or None."""
    for v in sorted(aic_db.versions(system, "comm", "nccl"), key=version_key, reverse=True):
        t = _times(system, v, ("reduce_scatter", "all_gather"))
        if {"reduce_scatter", "all_gather"} <= set(t.columns):
            return (t["reduce_scatter"] + t["all_gather"]).dropna().rename("sum_s").to_frame(), v
    return None


def ratios(systems: tuple[str, ...] = nt.NVSWITCH) -> pd.DataFrame:
    """Per table with all three collectives and group size: the median over sizes below 1 MiB of
    ``t_all_reduce / (t_reduce_scatter + t_all_gather)`` (columns system, version, gpus, k, sizes)."""
    out = []
    for s in systems:
        for v in aic_db.versions(s, "comm", "nccl"):
            t = _times(s, v, OPS)
            if not set(OPS) <= set(t.columns):
                continue
            t = t.dropna(subset=list(OPS))
            t = t[t.index.get_level_values("bytes") < BRIDGE_MAX_BYTES]
            k = t["all_reduce"] / (t["reduce_scatter"] + t["all_gather"])
            for g, grp in k.groupby(level="gpus"):
                out.append({"system": s, "version": v, "gpus": int(g), "k": float(grp.median()), "sizes": len(grp)})
    return pd.DataFrame(out)


def k_per_gpus(table: pd.DataFrame, exclude: str = "") -> dict[int, float]:
    """The bridge's share per group size: the median over tables (systems other than ``exclude``)."""
    t = table[table["system"] != exclude]
    return {int(g): float(grp["k"].median()) for g, grp in t.groupby("gpus")}


def derived_rows(sums: pd.DataFrame, k: dict[int, float], far: tuple[CollectiveFit, ...]) -> pd.DataFrame:
    """All-reduce rows (generic schema) at the table's sizes: ``k × (RS + AG)`` below 1 MiB, ``far``'s
    piecewise times from 1 MiB up; group sizes without a share (or a transfer) are dropped."""
    idx = sums.reset_index()
    rows = pd.DataFrame(
        {"kind": "allreduce", "dtype": DTYPE, "gpus": idx["gpus"].astype(int), "bytes": idx["bytes"].astype(int)}
    )
    small = (rows["bytes"] < BRIDGE_MAX_BYTES).to_numpy()
    t = np.where(small, rows["gpus"].map(k).to_numpy(float) * idx["sum_s"].to_numpy(float), np.nan)
    far_t = fc.predict_all_reduce(far, rows[~small]) if (~small).any() else np.array([])
    t[~small] = far_t
    return rows.assign(time_s=t).dropna().reset_index(drop=True)


def bridge(system: str) -> tuple[tuple[CollectiveFit, ...], str] | None:
    """(fits, provenance note) for ``system`` from its own reduce-scatter + all-gather table, or None."""
    got = sum_table(system)
    if got is None:
        return None
    sums, ver = got
    table = ratios()
    k = k_per_gpus(table)
    far, far_note, _ = nt.transfer(system)
    rows = derived_rows(sums, k, far)
    fits, _ = fc.fit_all_reduce(rows, names=nt.NAMES)
    per = {g: table.loc[table["gpus"] == g, "k"] for g in sorted(k)}
    spread = ", ".join(
        f"{g} GPUs {k[g]:.2f} ({per[g].min():.2f}-{per[g].max():.2f}, {len(per[g])} tables)" for g in sorted(k)
    )
    tables = ", ".join(
        f"{r.system}/comm/nccl/{r.version}" for r in table.drop_duplicates(["system", "version"]).itertuples()
    )
    note = (
        f"bridged: below {BRIDGE_MAX_BYTES >> 20} MiB, k x (reduce_scatter + all_gather) of {system}/comm/nccl/"
        f"{ver}/nccl_perf ({DTYPE} rows), k per group size the median over the NVSwitch tables timing all three "
        f"collectives ({spread}; {tables}); from {BRIDGE_MAX_BYTES >> 20} MiB up, {far_note}; one piecewise fit "
        f"on the derived rows"
    )
    return fits, note


def check() -> pd.DataFrame:
    """Held-out check per NVSwitch table with all three collectives: the bridge (share and donor from the
    other systems, fitted on the even half of its derived rows), the transfer alone, and the table's own
    fit (even half), each on the odd half of the measured all-reduce: median / p90 % by band."""
    table = ratios()
    cands = nt.donors()
    out = []
    for r in table.drop_duplicates(["system", "version"]).itertuples():
        others = {s: c for s, c in cands.items() if s != r.system}
        if r.system not in cands or not others:
            continue
        donor = cands[nt.choose(nt.check(others))][0]
        far = donor.to(cands[r.system][0].bw)
        t = _times(r.system, r.version, OPS).dropna(subset=list(OPS))
        meas = t["all_reduce"].rename("time_s").reset_index().assign(kind="allreduce", dtype=DTYPE)
        odd, even = meas[held_out(meas)], meas[~held_out(meas)]
        sums = (t["reduce_scatter"] + t["all_gather"]).rename("sum_s").to_frame()
        d = derived_rows(sums, k_per_gpus(table, exclude=r.system), far)
        own, _ = fc.fit_all_reduce(even, names=nt.NAMES)
        fit, _ = fc.fit_all_reduce(d[~held_out(d)], names=nt.NAMES)
        for how, fits in (("bridge", fit), (f"transfer from {donor.system}", far), ("own table (even half)", own)):
            out.append({"table": f"{r.system}/comm/nccl/{r.version}", "fit": how, **_bands(fits, odd)})
    return pd.DataFrame(out)


def _bands(fits: tuple[CollectiveFit, ...], rows: pd.DataFrame) -> dict[str, float]:
    """Median / p90 abs % error of ``fits`` on ``rows``, below and from 1 MiB."""
    pred = fc.predict_all_reduce(fits, rows)
    ok = ~np.isnan(pred)
    meas = rows["time_s"].to_numpy(float)
    small = (rows["bytes"] < BRIDGE_MAX_BYTES).to_numpy()
    out: dict[str, float] = {}
    for band, sel in (("below_1MiB", ok & small), ("from_1MiB", ok & ~small)):
        med, p90 = errors(pred[sel], meas[sel])
        out |= {f"{band}_median": med, f"{band}_p90": p90, f"{band}_rows": int(sel.sum())}
    return out

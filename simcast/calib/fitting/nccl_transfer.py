"""NCCL's own all-reduce for a system whose NCCL tables are reserved or missing: a transfer, chosen by check.

Systems with a usable NCCL all-reduce table of their own (nccl-tests ``all_reduce_perf`` in the
database) are fitted on it (:func:`simcast.calib.fitting.from_db.nccl_fits`). H100 and H200 have none that
simcast may read, so their fit comes from another NVSwitch system of the database (the *donor*):
the donor's piecewise fit (protocol switches as breakpoints) with its latencies kept and its bus
bandwidths scaled per group size by the ratio of the two systems' large-message (>= 64 MiB)
all-reduce bandwidth as the engines' own all-reduce tables measure it (past their custom-kernel
cutoff every engine calls NCCL, so those rows time NCCL on the target's own fabric).

The donor is chosen by a held-out check: every candidate donor predicts every *other* system that
has its own table (all rows of it: none was fitted on), and the donor with the lowest mean of those
median errors is used. The check's rows are reported in docs/accuracy.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from simcast.calib.fitting import fit_collectives as fc
from simcast.calib.readers import aic_db
from simcast.calib.readers.db_split import errors, newest, version_key
from simcast.core.device import CollectiveFit
from simcast.cost.comm.collectives import factor
from simcast.engines import ENGINES

NAMES = ("nccl_small", "nccl_medium", "nccl_large")
NVSWITCH = ("b200_sxm", "b300_sxm", "gb200", "gb300", "a100_sxm")
"""Database systems whose GPUs meet on NVSwitch (HGX / NVL boards), the candidates and checks of a transfer
to H100/H200 (NVLink4 + NVSwitch, HGX 8-GPU); L40S (PCIe) is a different fabric and left out."""
SMALL_BYTES = 2**20
"""Messages below 1 MiB: the latency-bound band reported on its own."""


def own_rows(system: str) -> tuple[pd.DataFrame, str] | None:
    """(all-reduce rows, version) of the newest non-reserved NCCL table of ``system`` holding all-reduce."""
    for v in sorted(aic_db.versions(system, "comm", "nccl"), key=version_key, reverse=True):
        r = aic_db.nccl_rows(system, v, system, ("all_reduce",))
        if len(r):
            return r, v
    return None


def large_message_bw(rows: pd.DataFrame, min_bytes: float = 64 * 2**20) -> dict[int, float]:
    """All-reduce bus bandwidth of the largest messages per group size: ``factor / slope`` of t over bytes."""
    out = {}
    for g, grp in rows[rows["bytes"] >= min_bytes].groupby("gpus"):
        if grp["bytes"].nunique() < 2:
            continue
        slope = np.polyfit(grp["bytes"].to_numpy(float), grp["time_s"].to_numpy(float), 1)[0]
        out[int(g)] = factor("all_reduce", int(g)) / slope
    return out


def engine_tables_bw(system: str) -> tuple[dict[int, float], list[str]]:
    """Large-message bus bandwidth per group size in ``system``'s engine all-reduce tables, and the tables."""
    rows, used = [], []
    for e in ENGINES:
        v = newest(system, "comm", e, "custom_allreduce_perf")
        if v:
            rows.append(aic_db.custom_allreduce_rows(system, e, v, system))
            used.append(f"{system}/comm/{e}/{v}/custom_allreduce_perf")
    return (large_message_bw(pd.concat(rows)) if rows else {}), used


def scaled(fits: tuple[CollectiveFit, ...], ratio: dict[int, float]) -> tuple[CollectiveFit, ...]:
    """``fits`` with each group size's bus bandwidths times ``ratio[gpus]`` (group sizes without a ratio dropped)."""
    return tuple(
        dataclasses.replace(f, bus_bw_bytes_per_s=float(f.bus_bw_bytes_per_s * ratio[f.gpus]))
        for f in fits
        if f.gpus in ratio
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Donor:
    """A donor system's NCCL all-reduce fit (on all its rows) and its engines' large-message bandwidths."""

    system: str
    version: str
    fits: tuple[CollectiveFit, ...]
    bw: dict[int, float]

    def to(self, target_bw: dict[int, float]) -> tuple[CollectiveFit, ...]:
        """The fit carried to a system with engine-table bandwidths ``target_bw``."""
        return scaled(self.fits, {g: target_bw[g] / self.bw[g] for g in target_bw if g in self.bw})


def donors(systems: tuple[str, ...] = NVSWITCH) -> dict[str, tuple[Donor, pd.DataFrame]]:
    """Every candidate with its own NCCL table: (donor, its rows)."""
    out = {}
    for s in systems:
        got = own_rows(s)
        bw, _ = engine_tables_bw(s)
        if got is None or not bw:
            continue
        rows, v = got
        fits, _ = fc.fit_all_reduce(rows, names=NAMES)
        out[s] = (Donor(system=s, version=v, fits=fits, bw=bw), rows)
    return out


def check(cands: dict[str, tuple[Donor, pd.DataFrame]]) -> pd.DataFrame:
    """Each donor predicts each other candidate's own table (all rows): median / p90 % error, all and < 1 MiB."""
    out = []
    for d, (donor, _) in cands.items():
        for t, (target, rows) in cands.items():
            if t == d:
                continue
            pred = fc.predict_all_reduce(donor.to(target.bw), rows)
            ok = ~np.isnan(pred)
            meas = rows["time_s"].to_numpy(float)
            small = ok & (rows["bytes"] < SMALL_BYTES).to_numpy()
            med, p90 = errors(pred[ok], meas[ok])
            smed, sp90 = errors(pred[small], meas[small])
            out.append(
                {
                    "donor": f"{d} nccl/{donor.version}",
                    "target": f"{t} nccl/{target.version}",
                    "rows": int(ok.sum()),
                    "median_abs_err_pct": med,
                    "p90_abs_err_pct": p90,
                    "below_1MiB_median": smed,
                    "below_1MiB_p90": sp90,
                }
            )
    return pd.DataFrame(out)


def choose(table: pd.DataFrame) -> str:
    """The donor (system name) whose predictions of the other systems have the lowest mean median error."""
    mean = table.groupby("donor")["median_abs_err_pct"].mean()
    return str(mean.idxmin()).split(" ")[0]


def transfer(system: str) -> tuple[tuple[CollectiveFit, ...], str, pd.DataFrame]:
    """(fits for ``system``, provenance note, the held-out check table) of the chosen donor's transfer."""
    cands = donors()
    table = check(cands)
    best = choose(table)
    donor = cands[best][0]
    tbw, used = engine_tables_bw(system)
    fits = donor.to(tbw)
    rows = table[table["donor"].str.startswith(best + " ")]
    ratios = ", ".join(f"{g} GPUs x{tbw[g] / donor.bw[g]:.2f}" for g in sorted(tbw) if g in donor.bw)
    note = (
        f"transferred: {best}/comm/nccl/{donor.version} all_reduce piecewise fit (all rows), latencies kept, bus "
        f"bandwidths scaled by {system}'s / {best}'s >=64 MiB all-reduce bandwidth in the engines' tables "
        f"({ratios}; {', '.join(used)}); donor chosen by a held-out check over the NVSwitch systems with their "
        f"own NCCL tables (lowest mean median error predicting the others: "
        + ", ".join(
            f"{r.target.split(' ')[0]} {r.median_abs_err_pct:.1f}/{r.p90_abs_err_pct:.1f}%" for r in rows.itertuples()
        )
        + f"); no NCCL all-reduce table of {system} is read"
    )
    return fits, note, table

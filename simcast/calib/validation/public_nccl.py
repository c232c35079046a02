"""NCCL's own all-reduce (the links' fits) against public NCCL timings: a check, nothing is fitted on them.

The rows are transcribed by hand from public pages (GitHub issues and pull requests, a results page) into
``benchmarks/data/nccl_tests_public.csv``, one citation per row (``source_url``) and one line per source in
``benchmarks/data/nccl_tests_public.md``. Columns: ``system`` (a shipped profile), ``gpus``,
``nccl_version``, ``size_bytes`` (per rank), ``time_us``, ``busbw_gbps`` (as published, or derived where
the note says so), ``in_place``, ``harness``, ``source_url``, ``note``.

The links' NCCL fits come from nccl-tests tables (aiconfigurator's collector runs ``all_reduce_perf``
without CUDA graphs and reads the out-of-place time), so only ``nccl-tests`` rows measure the same
thing; the other harnesses time NCCL differently (:data:`HARNESSES`) and are reported as context.
Predictions go through ``simcast validate``'s own per-row path with engine ``nccl``
(:func:`simcast.calib.validation.validate.predict_frame`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simcast.calib.validation.validate import predict_frame
from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.inputs.files import load_csv, numeric_column

HARNESSES = {
    "nccl-tests": "nccl-tests all_reduce_perf, no CUDA graph (what the links' fits are fitted on)",
    "nccl-tests-nvls": "nccl-tests all_reduce_perf, NCCL_ALGO=NVLS, no CUDA graph: like the fits, algorithm fixed",
    "nccl-tests-cudagraph": "nccl-tests all_reduce_perf -G (CUDA graphs): no host launch in the time",
    "nccl-tests-tuned": "nccl-tests tuned for latency (NCCL >= 2.27 symmetric memory), a best case quoted in text",
    "pynccl-cudagraph": "vLLM's PyNcclCommunicator, 10 all-reduces per CUDA-graph replay (an engine's view of NCCL)",
    "torch-eager": "torch.distributed.all_reduce, one blocking call timed with CUDA events (launch included)",
}
"""How each source timed NCCL; only ``nccl-tests`` rows are like for like with the links' fits."""
LIKE_FOR_LIKE = "nccl-tests"
JUDGE = ("nccl-tests", "nccl-tests-nvls")
"""Harnesses whose rows judge the links' NCCL fits (nccl-tests without CUDA graphs, default or NVLS algorithm)."""
BANDS = ((64 * 2**10, "<=64KiB"), (8 * 2**20, "64KiB-8MiB"), (float("inf"), ">=8MiB"))
"""Message-size bands of the reports: (upper bound in bytes, exclusive except the first, label)."""
SAME_HARNESS = {"yosoyjay": "Azure"}
"""Publishers counted as one in a leave-one-publisher-out check: yosoyjay/AI-benchmarking-guide is a fork of
Azure/AI-benchmarking-guide (the same harness on the same VM type), so it is held out with Azure's rows."""
SMALL_BYTES = 2**20
"""Messages below 1 MiB: the latency-bound band, reported on its own."""
COLUMNS = ("system", "gpus", "nccl_version", "size_bytes", "time_us", "busbw_gbps", "in_place", "harness")


def load(path: str | Path) -> pd.DataFrame:
    """The transcribed rows, numeric columns converted; every row names a known harness and a source."""
    field = "public NCCL rows"
    df = load_csv(path, field)
    for col in (*COLUMNS, "source_url", "note"):
        require(col in df.columns, field, str(path), f"has no column {col}")
    out = df.copy()
    out["gpus"] = numeric_column(df, "gpus", field, required=True, lo=2, hi=72, integer=True)
    out["size_bytes"] = numeric_column(df, "size_bytes", field, required=True, lo=1, hi=2**40, integer=True)
    out["time_us"] = numeric_column(df, "time_us", field, required=True, lo=0, hi=1e7, lo_open=True)
    out["busbw_gbps"] = numeric_column(df, "busbw_gbps", field, lo=0, hi=1e4)
    bad = sorted(set(df["harness"]) - set(HARNESSES))
    require(not bad, field, ", ".join(map(str, bad)), f"harness must be one of {', '.join(HARNESSES)}")
    require(
        bool(df["source_url"].fillna("").str.startswith("https://").all()), field, str(path), "every row cites a URL"
    )
    return out


def predict(rows: pd.DataFrame, devices: dict[str, DeviceSpec] | None = None) -> pd.DataFrame:
    """``rows`` plus ``predicted_us`` and the signed error ``err_pct`` (predicted / measured - 1, in %).

    ``devices``: profiles to predict with by system name (default: the shipped profile of each row's system).
    """
    frame = pd.DataFrame(
        {
            "kind": "allreduce",
            "device": rows["system"],
            "engine": "nccl",
            "dtype": "bf16",  # not read by the all-reduce path: time depends on bytes only
            "bytes": rows["size_bytes"].astype(float),
            "gpus": rows["gpus"].astype(int),
            "nodes": 1,
            "time_s": rows["time_us"].astype(float) * 1e-6,
        },
        index=rows.index,
    )
    parts = []
    for system, grp in frame.groupby("device", sort=False):
        dev = (devices or {}).get(str(system))
        parts.append(predict_frame(grp, dev) if dev is not None else predict_frame(grp))
    pred = pd.concat(parts).loc[rows.index]
    out = rows.copy()
    out["predicted_us"] = pred["predicted_s"].astype(float) * 1e6
    out["err_pct"] = (out["predicted_us"] / out["time_us"] - 1.0) * 100.0
    return out


def _stats(err: pd.Series) -> tuple[float, float, float]:
    e = err.dropna().to_numpy(float)
    if not len(e):
        return float("nan"), float("nan"), float("nan")
    return float(np.median(np.abs(e))), float(np.percentile(np.abs(e), 90)), float(np.median(e))


def summary(pred: pd.DataFrame) -> pd.DataFrame:
    """Per system, harness and group size: median / p90 absolute % error and the signed median, all rows and
    below 1 MiB (``signed`` < 0: the fit is faster than the measurement)."""
    out = []
    for (system, harness, _gpus), g in pred.groupby(["system", "harness", "gpus"], sort=True):
        med, p90, signed = _stats(g["err_pct"])
        small = g[g["size_bytes"] < SMALL_BYTES]
        smed, sp90, _ = _stats(small["err_pct"])
        out.append(
            {
                "system": system,
                "harness": harness,
                "gpus": int(g["gpus"].iloc[0]),
                "rows": len(g),
                "sizes": f"{_size(g['size_bytes'].min())}-{_size(g['size_bytes'].max())}",
                "median_abs_err_pct": med,
                "p90_abs_err_pct": p90,
                "signed_median_pct": signed,
                "below_1MiB_rows": len(small),
                "below_1MiB_median": smed,
                "below_1MiB_p90": sp90,
                "sources": " ".join(sorted(set(g["source_url"]))),
            }
        )
    return pd.DataFrame(out)


def band(size_bytes: pd.Series) -> pd.Series:
    """The :data:`BANDS` label of each message size (bytes per rank)."""
    b = size_bytes.astype(float)
    lab = np.where(b <= BANDS[0][0], BANDS[0][1], np.where(b < BANDS[1][0], BANDS[1][1], BANDS[2][1]))
    return pd.Series(lab, index=b.index)


def publisher(url: pd.Series) -> pd.Series:
    """The GitHub owner of each source URL, forks of one harness merged (:data:`SAME_HARNESS`)."""
    return url.str.extract(r"github\.com/([^/]+)/")[0].replace(SAME_HARNESS)


def band_summary(pred: pd.DataFrame, harnesses: tuple[str, ...] = JUDGE) -> pd.DataFrame:
    """Per group size and :data:`BANDS` band, on ``harnesses`` rows of H100/H200: rows, publishers, median
    absolute and signed median % error (``err_pct`` of :func:`predict`)."""
    p = pred[pred["harness"].isin(harnesses) & pred["system"].isin(("h100_sxm", "h200_sxm"))]
    out = []
    for (gpus, lab), g in p.assign(band=band(p["size_bytes"])).groupby(["gpus", "band"], sort=True):
        med, _, signed = _stats(g["err_pct"])
        out.append(
            {
                "gpus": int(gpus),
                "band": lab,
                "rows": len(g),
                "publishers": " ".join(sorted(set(publisher(g["source_url"])))),
                "median_abs_err_pct": med,
                "signed_median_pct": signed,
            }
        )
    order = {lab: i for i, (_, lab) in enumerate(BANDS)}
    return pd.DataFrame(out).sort_values(["gpus", "band"], key=lambda c: c.map(order) if c.name == "band" else c)


def with_small_latency(dev: DeviceSpec, add_s: float, gpus: tuple[int, ...]) -> DeviceSpec:
    """``dev`` with ``add_s`` seconds added to the latency of its intra-node ``nccl_small`` regimes of ``gpus``."""
    import dataclasses

    coll = tuple(
        dataclasses.replace(f, latency_s=f.latency_s + add_s) if f.algorithm == "nccl_small" and f.gpus in gpus else f
        for f in dev.links.intra_node.collectives
    )
    intra = dataclasses.replace(dev.links.intra_node, collectives=coll)
    return dataclasses.replace(dev, links=dataclasses.replace(dev.links, intra_node=intra))


def offset_check(rows: pd.DataFrame, fit_gpus: int = 8) -> pd.DataFrame:
    """Leave one publisher out, option (c) of docs/accuracy.md against the shipped transfer (a): the
    small-message latency offset ``median(measured - predicted)`` fitted on the *other* publishers' :data:`JUDGE`
    rows of ``fit_gpus`` GPUs below :data:`SMALL_BYTES` (H100 and H200 pooled: one fabric), added to the
    ``nccl_small`` latency of every group size, then the held-out publisher's rows predicted both ways.
    Per held-out publisher, group size and band: rows, the offset (us), median abs % error of (a) and (c)."""
    from simcast.inputs.loaders import load_device

    like = rows[rows["harness"].isin(JUDGE) & rows["system"].isin(("h100_sxm", "h200_sxm"))]
    like = like.assign(pub=publisher(like["source_url"]))
    base = predict(like)
    devs = {s: load_device(s) for s in like["system"].unique()}
    gpus = tuple(int(g) for g in sorted(like["gpus"].unique()))
    out = []
    for held in sorted(like["pub"].unique()):
        fit = base[(like["pub"] != held) & (like["gpus"] == fit_gpus) & (like["size_bytes"] < SMALL_BYTES)]
        if not len(fit):
            continue
        add_us = float(np.median(fit["time_us"] - fit["predicted_us"]))
        test = like[like["pub"] == held]
        moved = predict(test, {s: with_small_latency(d, add_us * 1e-6, gpus) for s, d in devs.items()})
        for (g, lab), grp in test.assign(band=band(test["size_bytes"])).groupby(["gpus", "band"], sort=False):
            out.append(
                {
                    "held_out": held,
                    "gpus": int(g),
                    "band": lab,
                    "rows": len(grp),
                    "offset_us": add_us,
                    "transfer_median": _stats(base.loc[grp.index, "err_pct"])[0],
                    "offset_median": _stats(moved.loc[grp.index, "err_pct"])[0],
                }
            )
    return pd.DataFrame(out)


def _size(b: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:g} {unit}"
    return f"{b:g} B"


def donor_check(rows: pd.DataFrame, cands: dict | None = None) -> pd.DataFrame:
    """Each candidate donor of :mod:`simcast.calib.fitting.nccl_transfer` carried to each target system of
    ``rows`` the way the shipped transfer is (latencies kept, bus bandwidths scaled by the target's engine
    tables), on the rows timed like the donors' tables (``nccl-tests``): median absolute and signed median %
    error per donor and target. A second check of the donor choice, on rows no database table holds
    (needs the optional extra aiconfigurator-core). ``cands``: :func:`~simcast.calib.fitting.nccl_transfer.donors`
    already built (built here when None)."""
    from simcast.calib.fitting import fit_collectives as fc
    from simcast.calib.fitting import nccl_transfer as nt

    cands = nt.donors() if cands is None else cands
    like = rows[rows["harness"] == LIKE_FOR_LIKE]
    out = []
    for target, grp in like.groupby("system", sort=True):
        tbw, _ = nt.engine_tables_bw(str(target))
        frame = pd.DataFrame({"kind": "allreduce", "gpus": grp["gpus"], "bytes": grp["size_bytes"].astype(float)})
        meas = grp["time_us"].to_numpy(float)
        for d, (donor, _) in cands.items():
            err = pd.Series((fc.predict_all_reduce(donor.to(tbw), frame) * 1e6 / meas - 1.0) * 100.0)
            med, _, signed = _stats(err)
            out.append(
                {
                    "donor": f"{d} nccl/{donor.version}",
                    "target": str(target),
                    "rows": int(err.notna().sum()),
                    "gpus": " ".join(str(g) for g in sorted(grp["gpus"].unique())),
                    "median_abs_err_pct": med,
                    "signed_median_pct": signed,
                }
            )
    return pd.DataFrame(out)

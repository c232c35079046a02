"""A new device's profile from its measured CSV and the closest shipped profile (pure: text in, text out).

``simcast calibrate my_gpu.csv --device-template l40s --out my_gpu.yaml`` starts from the template's
profile document and sets each value's note (:func:`template_doc`):

* ``name`` and ``description`` name the new device (the CSV's ``device`` column, its ``gpu_name``), and
  ``reported_name`` is its ``gpu_name`` (the template's is never carried over);
* **measured** values replace the template's: each measured dtype's ``matmul_flops_per_s`` becomes the
  best GEMM throughput the CSV holds (2MNK / time) over :data:`HEADROOM`, ``hbm_bw_bytes_per_s`` the best
  bytes/time of its GEMMs and adds (bytes as the simulator counts them) over :data:`HEADROOM` — not
  datasheet figures: the fitted efficiencies are relative to them, and only the product enters a
  prediction —, ``hbm_bytes`` the memory torch reported, ``devices_per_node`` the devices torch saw;
* every other value is **carried over** from the template, its line saying so (``carried over from l40s
  (not measured on my_gpu), where ...`` and what it was there: fitted, carried, or a cited prior);
* the template's ``engines:`` kernel fits (tables measured on the template's hardware) and its
  ``calibration:`` block are dropped: ``--engine`` on the new profile falls back to the generic roofline.

The fit itself (:func:`simcast.calib.fitting.fit.calibrate`) then replaces the efficiency and link values the CSV
covers, labelled ``fit by simcast calibrate on my_gpu.csv (sha256 ...)`` by
:func:`simcast.calib.profiles.profile_yaml.update_profile`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, PlainScalarString

from simcast.calib.profiles.profile_doc import delete, drop_remarks, get, insert, num, set_value, text_of
from simcast.calib.profiles.profile_notes import CARRIED_NOTE, FIT_NOTE, walk
from simcast.calib.readers.measured_schema import META_COLUMNS
from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.cost.kernels import one_kernel as kernels
from simcast.inputs.schema import Str

MEASURED_NOTE = "measured by simcast microbench"
HEADROOM = 0.8
"""The best throughput measured is taken as this fraction of the peak written (FLOP/s and bytes/s alike): only
peak x efficiency enters a prediction, and this leaves the fitted efficiencies room on both sides within their
(0.2, 1] bounds (with the best as the peak, the saturating curves would need efficiencies above 1)."""


@dataclass(frozen=True, kw_only=True)
class MeasuredDevice:
    """What the CSV says about the device itself (FLOP/s, bytes/s, bytes, counts) and what it ran on."""

    name: str
    matmul_flops_per_s: dict[str, float] = field(default_factory=dict)  # best GEMM FLOP/s per dtype / HEADROOM
    gemm_rows: dict[str, int] = field(default_factory=dict)
    hbm_bw_bytes_per_s: float | None = None  # best bytes/s of the adds and GEMMs / HEADROOM
    add_rows: int = 0
    hbm_bytes: int | None = None
    devices: int | None = None
    meta: dict[str, str] = field(default_factory=dict)  # META_COLUMNS values (first row)


def _first(rows: pd.DataFrame, col: str) -> str:
    if col not in rows:
        return ""
    vals = rows[col].dropna().astype(str)
    return str(vals.iloc[0]) if len(vals) else ""


def check_meta_columns(rows: pd.DataFrame, where: str) -> None:
    """The META_COLUMNS values the profile takes (each column's first): names, no control characters, at
    most 256 characters (they become the profile's ``description``, ``reported_name`` and provenance).
    Errors name the CSV's column (``where``: the CSV), never the template."""
    for col in META_COLUMNS:
        value = _first(rows, col)
        if value:
            Str(256).check(value, f"{where}: column {col}")


def measured_device(rows: pd.DataFrame, template: DeviceSpec, name: str) -> MeasuredDevice:
    """The device facts in ``rows`` (checked generic rows of one device); FLOPs and bytes are the simulator's own
    (:mod:`simcast.cost.kernels.one_kernel`) so peak x efficiency reproduces what was timed."""
    peaks: dict[str, float] = {}
    counts: dict[str, int] = {}
    byte_rates: list[float] = []
    g = rows[rows["kind"] == "gemm"]
    for dt, grp in g.groupby(g["dtype"].fillna("bf16").astype(str)):
        preds = [
            (kernels.gemm(template, int(m), int(n), int(k), str(dt)), float(t))
            for m, n, k, t in zip(grp["m"], grp["n"], grp["k"], grp["time_s"])
        ]
        peaks[str(dt)], counts[str(dt)] = max(p.flops / t for p, t in preds) / HEADROOM, len(preds)
        byte_rates += [p.bytes / t for p, t in preds]
    a = rows[rows["kind"] == "add"]
    dts = a["dtype"].fillna("bf16").astype(str)
    byte_rates += [
        kernels.elementwise(template, "add", int(m), int(n), str(dt)).bytes / float(t)
        for m, n, dt, t in zip(a["m"], a["n"], dts, a["time_s"])
    ]
    bw = max(byte_rates) / HEADROOM if byte_rates else None
    meta = {c: _first(rows, c) for c in META_COLUMNS}
    mem = pd.to_numeric(pd.Series([meta["memory_bytes"]]), errors="coerce").iloc[0]
    cnt = pd.to_numeric(pd.Series([meta["gpu_count"]]), errors="coerce").iloc[0]
    return MeasuredDevice(
        name=name,
        matmul_flops_per_s=peaks,
        gemm_rows=counts,
        hbm_bw_bytes_per_s=bw,
        add_rows=len(a),
        hbm_bytes=int(mem) if math.isfinite(mem) and mem >= 1 else None,
        devices=int(cnt) if math.isfinite(cnt) and cnt >= 1 else None,
        meta=meta,
    )


def _carried(template: str, name: str, value: str, comment: str) -> str:
    comment = comment.strip()
    if comment.startswith(FIT_NOTE):
        how = comment
    elif comment.startswith(CARRIED_NOTE):
        how = f"it was {comment}"
    else:
        how = f"it is {value}: {comment}" if comment else f"it is {value}, no source comment"
    return f"{CARRIED_NOTE} {template} (not measured on {name}), where {how}"


def _measured(dev: MeasuredDevice, csv: str) -> dict[str, tuple[Any, str]]:
    """``{path: (value, note)}`` of what the CSV measured on the device itself."""
    measured: dict[str, tuple[Any, str]] = {}
    for dt, flops in dev.matmul_flops_per_s.items():
        measured[f"compute.matmul_flops_per_s.{dt}"] = (
            num(flops),
            f"{MEASURED_NOTE}: best 2MNK/time of {dev.gemm_rows[dt]} {dt} GEMMs in {csv} / {HEADROOM} (headroom "
            "for the fitted efficiency; not a datasheet peak)",
        )
    if dev.hbm_bw_bytes_per_s:
        measured["memory.hbm_bw_bytes_per_s"] = (
            num(dev.hbm_bw_bytes_per_s),
            f"{MEASURED_NOTE}: best bytes/time of the {sum(dev.gemm_rows.values())} GEMMs and {dev.add_rows} "
            f"adds in {csv} / {HEADROOM} (headroom for the fitted efficiencies; not a datasheet figure)",
        )
    if dev.hbm_bytes:
        measured["memory.hbm_bytes"] = (dev.hbm_bytes, f"{MEASURED_NOTE}: device memory torch reports ({csv})")
    if dev.devices:
        measured["links.devices_per_node"] = (
            dev.devices,
            f"{MEASURED_NOTE}: devices torch saw when {csv} was measured (assumed to be one node)",
        )
    return measured


def template_doc(doc: CommentedMap, template: DeviceSpec, dev: MeasuredDevice, csv: str) -> None:
    """The template profile's document ``doc`` rewritten for ``dev`` (module docstring); ``csv`` names the data."""
    t, name = template.name, dev.name
    what = dev.meta.get("gpu_name") or name
    measured = _measured(dev, csv)
    for key in ("engines", "calibration", "reported_name"):  # the template's hardware name is never the new one's
        delete(doc, key)
    drop_remarks(doc)  # the template's own remarks describe the template's hardware
    doc.yaml_set_start_comment(
        f"{name}: {what}, onboarded with simcast microbench ({csv}) and simcast calibrate --device-template {t}.\n"
        f"Values measured or fitted on {name} say so; every other value is carried over from {t}, labelled."
    )
    for path, at, value, comment in list(walk(doc)):
        if path == "name":
            set_value(doc, path, PlainScalarString(name), "")
        elif path == "description":
            text = f"{what} (measured by simcast microbench; the rest from {t})"
            set_value(doc, path, DoubleQuotedScalarString(text), "")
            if dev.meta.get("gpu_name"):  # what the driver reports for the new device (engines test it)
                gpu = DoubleQuotedScalarString(dev.meta["gpu_name"])
                insert(doc, list(doc).index("description") + 1, "reported_name", gpu, f"{MEASURED_NOTE}: torch's name")
        elif path in measured:
            v, note = measured.pop(path)
            set_value(doc, at, v, f"{note}; {t} has {text_of(value)}")
        else:
            set_value(doc, at, value, _carried(t, name, text_of(value), comment))
    new = [p for p in measured if p.startswith("compute.matmul_flops_per_s.")]
    peaks = get(doc, "compute.matmul_flops_per_s")
    require(isinstance(peaks, dict) or not new, "--device-template", t, "has no compute.matmul_flops_per_s section")
    for p in new:  # a dtype measured here that the template has no peak for
        v, note = measured.pop(p)
        set_value(doc, p, v, f"{note}; {t} has none")


def template_provenance(
    template: DeviceSpec, dev: MeasuredDevice, csv: str, sha256: str, held_out: dict[str, float]
) -> dict[str, Any]:
    """Entries of the ``calibration:`` block that say how the profile was made (before the fit's own)."""
    return {
        "method": f"simcast microbench on {dev.name}, fitted by simcast calibrate --device-template",
        "template": template.name,
        "csv_sha256": sha256,
        "measured_on": {k: v for k, v in dev.meta.items() if v},
        "dropped": _DROPPED.format(t=template.name),
        "held_out_median_abs_err_pct": {k: round(v, 2) for k, v in held_out.items()},
    }


_DROPPED = (
    "{t}'s engines: kernel fits and calibration: block (measured on {t}'s hardware); "
    "--engine on this profile uses the generic roofline"
)


def error_report(rows: pd.DataFrame, dev: DeviceSpec, fit_dtype: str) -> pd.DataFrame:
    """Per kind (GEMMs per dtype): rows, whether ``simcast calibrate`` fitted them or they are held out, and the
    median and p90 absolute % error of ``dev``'s prediction against the measured time."""
    import numpy as np

    from simcast.calib.fitting.fit import ELEMENTWISE_KINDS
    from simcast.calib.validation.validate import predict_frame

    pred = predict_frame(rows, dev)
    dts = pred["dtype"].fillna("bf16").astype(str)
    pred["group"] = [f"{k}.{d}" if k == "gemm" else str(k) for k, d in zip(pred["kind"], dts)]
    fitted = set(ELEMENTWISE_KINDS) | {"p2p", "allreduce", "allgather", f"gemm.{fit_dtype}"}
    out = []
    for group, g in pred.groupby("group", sort=True):
        e = g["abs_err_pct"].dropna()
        out.append(
            {
                "kind": group,
                "role": "fitted" if group in fitted else "held out",
                "rows": len(g),
                "median_abs_err_pct": float(np.median(e)) if len(e) else float("nan"),
                "p90_abs_err_pct": float(np.percentile(e, 90)) if len(e) else float("nan"),
            }
        )
    return pd.DataFrame(out)

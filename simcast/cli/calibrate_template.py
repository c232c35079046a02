"""``simcast calibrate MEASURED.csv --device-template T --out NEW.yaml``: a new device's profile (edge module).

The CSV (``simcast microbench --out``) names the new device in its ``device`` column; the template,
the closest shipped profile, supplies every value the CSV does not measure (labelled carried over);
:mod:`simcast.calib.fitting.template` builds the profile document, :func:`simcast.calib.fitting.fit.calibrate`
fits what the rows cover, and the profile must load before it is written.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import re
from pathlib import Path

from simcast.cli.outputs import emit, write_atomic
from simcast.core.errors import require

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_profile_name(name: str, field: str) -> str:
    """A device name usable as a profile name and file stem (letters, digits, ``_ . -``; at most 64)."""
    require(bool(_NAME.fullmatch(name)), field, name, "must be 1-64 letters, digits, '_', '.' or '-' (a profile name)")
    return name


def check_profile_out(out: str, name: str) -> None:
    """The profile file ``out`` is named after the profile (``<name>.yaml``), as every profile must be."""
    require(
        Path(out).stem == name,
        "--out",
        out,
        f"the profile is named {name}: write it to {name}.yaml (a profile's file name is its name)",
    )


def cmd_calibrate_template(a: argparse.Namespace) -> int:
    import pandas as pd

    from simcast.calib.fitting.fit import calibrate, gemm_fit_dtype
    from simcast.calib.fitting.template import (
        check_meta_columns,
        error_report,
        measured_device,
        template_doc,
        template_provenance,
    )
    from simcast.calib.profiles import profile_notes as pn
    from simcast.calib.profiles import profile_yaml as py
    from simcast.calib.profiles.profile_doc import dump_doc, load_doc
    from simcast.calib.readers.vidur import VIDUR_SNAPSHOT
    from simcast.calib.validation.validate import check_fit_columns, read_measured
    from simcast.inputs.files import MAX_CSV_BYTES, read_bytes, read_text
    from simcast.inputs.loaders import device_from_text, load_device, profile_path
    from simcast.render.text import markdown_table

    require(a.device is None, "--device", a.device, "give --device (a profile to refit) or --device-template, not both")
    require(not a.transfer_from, "--transfer-from", a.transfer_from, "cannot be combined with --device-template")
    require(len(a.measured) == 1, "measured", a.measured, "--device-template takes one CSV (simcast microbench --out)")
    path = Path(a.measured[0])
    sha = hashlib.sha256(read_bytes(path, "measured", MAX_CSV_BYTES)).hexdigest()
    field = f"measured {path.name}"
    rows = check_fit_columns(read_measured(path), field)
    names = sorted({str(v) for v in rows["device"].dropna()}) if "device" in rows else []
    require(len(names) == 1, f"{field}: column device", ",".join(names) or None, "must hold one device name")
    name = check_profile_name(names[0], f"{field}: column device")
    check_meta_columns(rows, field)
    template = load_device(a.device_template)
    check_profile_out(a.out, name)
    doc = load_doc(read_text(profile_path(a.device_template), "--device-template"), "--device-template")
    template_doc(doc, template, measured_device(rows, template, name), path.name)
    base = device_from_text(dump_doc(doc), "--device-template")
    dev, errors = calibrate(rows, base)
    gemm = rows[rows["kind"] == "gemm"]
    fit_dt = gemm_fit_dtype(gemm.assign(dtype=gemm["dtype"].fillna("bf16"))) if len(gemm) else "bf16"
    report = error_report(rows, dev, fit_dt)
    held = {str(r["kind"]): float(r["median_abs_err_pct"]) for _, r in report.iterrows() if r["role"] == "held out"}
    files = [f"{path.name} (sha256 {sha})"]
    notes = py.fit_notes(errors, files, VIDUR_SNAPSHOT)
    py.update_profile(doc, dev, notes)
    carried, _ = pn.carried_counts(doc)
    prov = template_provenance(template, measured_device(rows, template, name), path.name, sha, held)
    prov |= py.fit_provenance(doc, files[0], _dt.date.today().isoformat(), errors, None)
    py.set_calibration(doc, prov | {"carried_over_values": carried})
    out = dump_doc(doc)
    device_from_text(out, "--out")  # it must load before it replaces a file
    write_atomic(a.out, "--out", lambda tmp: tmp.write_text(out))
    emit(
        f"simcast calibrate: {name} from {path.name} (sha256 {sha[:16]}...), template {template.name}: "
        f"{pn.parameters(py.fitted_paths(errors))} parameters fitted, {carried} values carried over from "
        f"{template.name}"
    )
    emit()
    emit(markdown_table(report if len(report) else pd.DataFrame()))
    emit()
    emit(
        "fitted: the rows the fit used (in-sample error); held out: rows no fitted parameter saw "
        "(attention, GEMMs of other dtypes): the error a prediction on this profile carries"
    )
    emit(f"wrote {a.out}: use it with --device {a.out}")
    return 0

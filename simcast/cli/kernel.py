"""CLI wiring for ``simcast kernel``, ``simcast calibrate`` and ``simcast validate`` (edge module)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
from pathlib import Path

from simcast.cli.calibrate_db import add_from_db_args, cmd_calibrate_from_db
from simcast.cli.calibrate_template import check_profile_out, cmd_calibrate_template
from simcast.cli.kernel_flags import KERNEL_FLAGS, CalibrateFlags, KernelFlags, ValidateFlags
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import emit, emit_json, run_metadata, same_file, write_text
from simcast.cli.shared_flags import add_fabric_args, fabric_choice
from simcast.core.errors import require


# ------------------------------------------------------------------ kernel
def add_kernel_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="kernel", required=True, parser_class=type(p))
    for name, help_ in (
        ("gemm", "one GEMM (M×K)·(K×N)"),
        ("attention", "one attention kernel"),
        ("allreduce", "NCCL-style all-reduce"),
        ("allgather", "NCCL-style all-gather"),
        ("p2p", "one send/recv between two GPUs"),
    ):
        s = sub.add_parser(name, help=help_, description=help_)
        engine = () if name == "p2p" else ("allreduce_engine",) if name == "allreduce" else ("engine",)
        add_option_flags(s, KernelFlags, ("device", "json", *engine, *KERNEL_FLAGS[name]))
        if name in ("allreduce", "allgather", "p2p"):
            add_fabric_args(s)


def cmd_kernel(a: argparse.Namespace) -> int:
    from simcast.cost.kernels import one_kernel as kernels
    from simcast.inputs.loaders import load_device

    dev = load_device(a.device)
    if a.kernel in ("allreduce", "allgather", "p2p"):
        from simcast.core.fabrics import with_fabric

        dev = with_fabric(dev, fabric_choice(a))
    if a.kernel == "gemm":
        p = kernels.gemm(dev, a.m, a.n, a.k, a.dtype, engine=a.engine)
    elif a.kernel == "attention":
        p = kernels.attention(
            dev, a.phase, a.batch, a.q_len, a.kv_len, a.heads, a.kv_heads, a.head_dim, a.dtype, engine=a.engine
        )
    elif a.kernel == "p2p":
        p = kernels.p2p(dev, a.bytes, a.cross_node)
    else:
        p = kernels.collective(dev, a.kernel, a.bytes, a.gpus, a.nodes, engine=a.engine)
    if a.json:
        run = run_metadata(device=a.device, engine=getattr(a, "engine", None))
        emit_json({**dataclasses.asdict(p), "device": dev.name, "run": run}, indent=None)
    else:
        extra = f", {p.flops / 1e9:.3f} GFLOP" if p.flops else ""
        link = f" over {p.link}" if p.link else ""
        how = f" [{p.kernel_model}]" if p.kernel_model else ""
        emit(
            f"{p.kernel} on {dev.name}{link}: {p.time_s * 1e6:.2f} us ({p.bound}-bound{extra}, "
            f"{p.bytes / 1e6:.3f} MB){how}"
        )
    return 0


# ------------------------------------------------------------------ calibrate
def add_calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(  # a positional list: argparse takes no dest for it, which a Flag sets
        "measured", nargs="*", help="measured CSVs: the generic schema or Vidur profiling files"
    )
    add_option_flags(p, CalibrateFlags, ("device", "out", "transfer_from", "device_template"))
    add_from_db_args(p)


def check_calibrate_out(a: argparse.Namespace) -> None:
    """``--out`` is none of the files the run reads (a measured CSV, the template, the profile carried over
    from): writing it would replace the input with the output. ``--device`` may be refitted in place."""
    from simcast.inputs.loaders import profile_path

    inputs = [("measured", m) for m in a.measured or ()]
    inputs += [(f, v) for f, v in (("--device-template", a.device_template), ("--transfer-from", a.transfer_from))]
    for flag, value in inputs:
        if value is not None:
            src = profile_path(value) if flag != "measured" else value
            require(not same_file(a.out, src), "--out", a.out, f"is the {flag} input {value}: write to another file")


def cmd_calibrate(a: argparse.Namespace) -> int:
    require(
        a.from_db is None or a.device_template is None, "--device-template", a.device_template, "not with --from-db"
    )
    check_calibrate_out(a)
    if a.from_db is not None:
        return cmd_calibrate_from_db(a)
    if a.device_template is not None:
        return cmd_calibrate_template(a)
    require(a.device is not None, "--device", None, "is required (the profile to start from)")
    import pandas as pd

    from simcast.calib.fitting.fit import calibrate, transfer
    from simcast.calib.profiles import profile_notes as pn
    from simcast.calib.profiles import profile_yaml as py
    from simcast.calib.profiles.profile_doc import dump_doc, load_doc
    from simcast.calib.readers.vidur import VIDUR_SNAPSHOT
    from simcast.calib.validation.validate import check_fit_columns, read_measured
    from simcast.inputs.files import read_text
    from simcast.inputs.loaders import device_from_text, load_device, profile_path, read_yaml

    base = load_device(a.device)
    check_profile_out(a.out, base.name)
    src = profile_path(a.device)
    doc = load_doc(read_text(src, "--device"), "--device")
    old_block = (read_yaml(src, "device profile") or {}).get("calibration")
    today = _dt.date.today().isoformat()
    if a.transfer_from:
        require(not a.measured, "measured", a.measured, "give either measured CSVs or --transfer-from")
        ref = load_device(a.transfer_from)
        ref_path = profile_path(a.transfer_from)
        dev = transfer(ref, base)
        ref_doc = load_doc(read_text(ref_path, "--transfer-from"), "--transfer-from")
        notes, carried, fitted_on_src = py.transfer_notes(ref, ref_doc, base, dev)
        ref_block = (read_yaml(ref_path, "device profile") or {}).get("calibration")
        py.update_profile(doc, dev, notes)
        py.set_calibration(doc, py.transfer_provenance(ref, ref_block, today, carried, fitted_on_src))
        summary = (
            f"0 fitted parameters; {carried} values carried over from {ref.name}, {fitted_on_src} of them fitted there"
        )
    else:
        require(bool(a.measured), "measured", a.measured, "give at least one measured CSV")
        rows = pd.concat(
            [check_fit_columns(read_measured(m), f"measured {Path(m).name}") for m in a.measured], ignore_index=True
        )
        rows = rows[rows.get("device", pd.Series([base.name] * len(rows))).fillna(base.name) == base.name]
        require(len(rows) > 0, "measured", a.measured, f"no rows for device {base.name}")
        dev, errors = calibrate(rows, base)
        files = sorted({str(s) for s in rows.get("source", pd.Series(dtype=str)).dropna()}) or [
            Path(m).name for m in a.measured
        ]
        where = ", ".join(f"../shared/calibration/{f}" if f.startswith("vidur/") else f for f in files)
        notes = py.fit_notes(errors, files, VIDUR_SNAPSHOT)
        py.update_profile(doc, dev, notes)
        py.set_calibration(doc, py.fit_provenance(doc, where, today, errors, old_block))
        summary = f"{pn.parameters(py.fitted_paths(errors))} parameters fitted in this run"
    out = dump_doc(doc)
    device_from_text(out, "--out")  # it must load before it replaces a file
    write_text(a.out, "--out", out)
    emit(f"wrote {a.out} ({summary})")
    return 0


# ------------------------------------------------------------------ validate
def add_validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(  # a positional: argparse takes no dest for it, which a Flag sets
        "measured", help="measured CSV (generic schema, see docs/accuracy.md) or a Vidur profiling file"
    )
    add_option_flags(p, ValidateFlags, ("device", "engine", "json"))


def cmd_validate(a: argparse.Namespace) -> int:
    from simcast.calib.validation.validate import error_table, predict_frame, read_measured
    from simcast.render.text import markdown_table

    df = read_measured(a.measured)
    if a.device is not None:
        from simcast.inputs.loaders import load_device

        load_device(a.device)  # a bad --device is one error line, not one reason per row
    pred = predict_frame(df, a.device, engine=a.engine)
    if a.json:
        cols = [c for c in pred.columns if c != "abs_err_pct"]
        recs = pred[cols].astype(object).where(pred[cols].notna(), None).to_dict("records")
        emit_json({"run": run_metadata(device=a.device, engine=a.engine), "rows": recs}, indent=None)
        return 0
    by_kind = error_table(pred, ("kind", "engine") if "engine" in pred else ("kind",))
    emit(markdown_table(by_kind))
    emit()
    emit(markdown_table(error_table(pred, ("kind", "gpus", "nodes", "band"))))
    missing = pred[pred["predicted_s"].isna()]
    if len(missing):
        emit(f"\n{len(missing)} rows not predicted, e.g.: {missing['reason'].iloc[0]}")
    return 0

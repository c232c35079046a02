"""``simcast calibrate --from-db aiconfigurator --system S --engine E [--version V] --out X.yaml`` (edge module)."""

from __future__ import annotations

import argparse
import datetime as _dt
from dataclasses import dataclass

from simcast.api.options import Flag, opt
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import emit, write_text
from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.engines import ENGINES

DATABASES = ("aiconfigurator",)


@dataclass(frozen=True, kw_only=True)
class FromDbFlags:
    """``calibrate --from-db``: the measured-kernel database, its system, engines and version."""

    from_db: str | None = opt(
        None,
        "the measured-kernel database fitted instead of CSVs",
        flag=Flag(
            names=("--from-db",),
            help="fit from a measured-kernel database instead of CSVs: aiconfigurator (needs the optional "
            "extra: pip install 'simcast[measured]')",
            metavar="DB",
        ),
    )
    system: str | None = opt(
        None,
        "the database's system",
        flag=Flag(names=("--system",), help="--from-db: the database's system (e.g. h100_sxm, b200_sxm)"),
    )
    engine: str | None = opt(
        None,
        "engines to fit, comma-separated or all",
        flag=Flag(
            names=("--engine",),
            help=f"--from-db: engine(s) to fit, comma-separated, 'all' ({', '.join(ENGINES)}) or 'none' (only "
            "NCCL's link collectives; the engines' sections are kept)",
        ),
    )
    version: str | None = opt(
        None,
        "engine version folder (None: newest non-reserved)",
        flag=Flag(names=("--version",), help="--from-db: engine version folder [default: newest non-reserved]"),
    )


def add_from_db_args(p: argparse.ArgumentParser) -> None:
    add_option_flags(p, FromDbFlags, ("from_db", "system", "engine", "version"))


def parse_engines(value: str | None) -> tuple[str, ...]:
    require(value is not None, "--engine", value, f"--from-db needs --engine ({', '.join(ENGINES)} or all)")
    assert value is not None
    if value == "none":
        return ()
    names = ENGINES if value == "all" else tuple(v.strip() for v in value.split(",") if v.strip())
    require(bool(names), "--engine", value, f"allowed: {', '.join(ENGINES)}, all, none (comma-separated list)")
    for n in names:
        require(n in ENGINES, "--engine", n, f"allowed: {', '.join(ENGINES)}, all (comma-separated list)")
    return names


def _runs_on(engine: str, device: DeviceSpec) -> bool:
    """Whether ``engine`` accepts ``device`` (its ``check_device`` raises no input error)."""
    from simcast.core.errors import SimcastInputError
    from simcast.engines import get_engine

    try:
        get_engine(engine).check_device(device)
    except SimcastInputError:
        return False
    return True


def _pct(errs: dict[str, tuple[float, float]]) -> dict[str, list[float]]:
    return {k: [round(m, 1), round(p, 1)] for k, (m, p) in errs.items()}


def _write_nccl(doc, system: str) -> dict:
    """Write NCCL's own all-reduce into ``doc``'s intra-node link; the ``calibration.from_db.nccl`` entry.

    A fit on this system's own table is written unless the link holds collectives an earlier run fitted on this
    device's own measurements. A system with no usable NCCL table (h100_sxm, h200_sxm) gets the transfer chosen
    by the held-out check, below 1 MiB bridged from its own reduce-scatter + all-gather rows
    (simcast.calib.fitting.nccl_bridge), written even over Vidur-style fits: those time torch.distributed calls
    (a 20-45 us host path on every message), not the NCCL kernels engines run, and are 2-3x too slow below
    1 MiB against NCCL's own timings.
    """
    from simcast.calib.fitting.from_db import nccl_fits
    from simcast.calib.profiles import profile_notes as pn
    from simcast.calib.profiles.engines_yaml import replace_link_collectives

    fits, nerr, note = nccl_fits(system)
    nccl: dict = {"source": note, "held_out_abs_err_pct": _pct(nerr)}
    if not nerr:
        donor = note.split("transferred: ", 1)[-1].split("/", 1)[0]
        carried = (
            f"{pn.CARRIED_NOTE} {donor} (NCCL's own all-reduce), where fit by simcast calibrate --from-db on "
            f"its nccl_perf table; bus bandwidth scaled to this system's engine tables (calibration.from_db.nccl)"
        )
        nccl["written"] = f"yes: links.intra_node.collectives ({2 * len(fits)} values carried over from {donor})"
        if "bridged: " in note:
            carried = (
                f"{pn.CARRIED_NOTE} {system}'s own NCCL reduce-scatter + all-gather below 1 MiB (times the share "
                f"NCCL's own all-reduce takes on other systems) and {donor} from 1 MiB (bandwidth-scaled), where "
                f"fit by simcast calibrate --from-db on those derived rows (calibration.from_db.nccl)"
            )
            nccl["written"] = (
                f"yes: links.intra_node.collectives ({2 * len(fits)} values fitted on derived rows: {system}'s "
                f"own reduce-scatter + all-gather below 1 MiB, {donor}'s transfer from 1 MiB)"
            )
        replace_link_collectives(doc, "intra_node", fits, {"": carried})
    elif pn.link_fitted_here(doc, "intra_node"):
        nccl["written"] = "no: the link keeps the collectives fitted on this device's own measurements"
    else:
        med, p90 = nerr["nccl.all_reduce"]
        fit_note = f"{pn.FIT_NOTE} --from-db on {note}, held-out median {med:.1f}%, p90 {p90:.1f}%"
        replace_link_collectives(doc, "intra_node", fits, {"": fit_note})
        nccl["written"] = f"yes: links.intra_node.collectives ({2 * len(fits)} fitted values)"
        nccl["fitted_parameters"] = 2 * len(fits)
    return nccl


def cmd_calibrate_from_db(a: argparse.Namespace) -> int:
    from simcast.calib.fitting.from_db import SYSTEMS, fit_engine
    from simcast.calib.profiles import profile_yaml as py
    from simcast.calib.profiles.engines_yaml import set_engines
    from simcast.calib.profiles.profile_doc import load_doc
    from simcast.calib.readers import aic_db
    from simcast.cli.calibrate_template import check_profile_out
    from simcast.inputs.files import loads_yaml, read_text
    from simcast.inputs.loaders import load_device, profile_path

    require(a.from_db in DATABASES, "--from-db", a.from_db, f"allowed: {', '.join(DATABASES)}")
    require(not a.measured, "measured", a.measured, "give either measured CSVs or --from-db")
    require(not a.transfer_from, "--transfer-from", a.transfer_from, "cannot be combined with --from-db")
    require(a.system in SYSTEMS, "--system", a.system, f"allowed: {', '.join(SYSTEMS)}")
    engines = parse_engines(a.engine)
    aic_db.data_root()  # one line telling how to install the extra when it is missing
    device = a.device or SYSTEMS[a.system].profile
    base = load_device(device)
    if a.engine == "all":  # 'all' means the engines that run on this device (ATOM refuses NVIDIA GPUs)
        engines = tuple(e for e in engines if _runs_on(e, base))
    check_profile_out(a.out, base.name)
    src = profile_path(device)
    text = read_text(src, "--device")
    previous = (loads_yaml(text, "--device") or {}).get("calibration") or {}
    doc = load_doc(text, "--device")
    fitted: dict[str, tuple] = {}
    summary: dict[str, dict] = {}
    for e in engines:
        ek, errs, data = fit_engine(a.system, e, base, a.version)
        fitted[e] = (ek, errs)
        summary[e] = {"tables": list(data.tables), "proxies": list(data.proxies), "held_out_abs_err_pct": _pct(errs)}
        emit(f"{e}: " + ", ".join(f"{k} {m:.1f}/{p:.1f}%" for k, (m, p) in errs.items()) + " (held-out median/p90)")
    if engines:
        set_engines(doc, fitted, f"simcast calibrate --from-db aiconfigurator --system {a.system}", keep=ENGINES)
    nccl = _write_nccl(doc, a.system)
    kept = (previous.get("from_db") or {}).get("engines", {}) if isinstance(previous, dict) else {}
    text = py.profile_text(
        doc,
        "from_db",
        {
            "package": f"aiconfigurator-core {aic_db.package_version()}",
            "system": a.system,
            "date": _dt.date.today().isoformat(),
            "split": "fit on shapes whose CRC32 is even, errors on the odd half",
            "fitted_parameters": nccl.get("fitted_parameters", 0),
            "engines": {e: summary.get(e) or kept[e] for e in ENGINES if e in summary or e in kept},
            "nccl": nccl,
        },
        "--out",  # it must load before it replaces a file
    )
    write_text(a.out, "--out", text)
    emit(f"wrote {a.out} (engines {', '.join(engines)} on {a.system}; NCCL link fits written: {nccl['written']})")
    return 0

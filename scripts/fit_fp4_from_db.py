"""Fit the NVFP4 GEMM and MoE kernels of the shipped Blackwell profiles from aiconfigurator-core's FP4 tables.

Usage: python scripts/fit_fp4_from_db.py SYSTEM [SYSTEM ...]   (needs the optional extra: aiconfigurator-core)

The same fitting code and split as ``simcast calibrate --from-db aiconfigurator`` (the nvfp4 family of
:data:`simcast.calib.fitting.kernel_choices.GEMM_FAMILIES` and :data:`simcast.core.kernel_fits.MOE_DTYPES`):
each table's rows are split by a CRC32 hash of the shape, the fit uses the even half and the error is
reported on the odd half. Only the nvfp4 rows are fitted, so the other fits of the profiles stay as they are
(a full ``calibrate --from-db`` run would refit every family). Prints, per engine, the two YAML flow lines
to add to ``engines.<engine>.gemm`` / ``.moe`` and the ``fit_abs_err_pct`` entries; ``--write`` inserts them
into the profile.
"""

from __future__ import annotations

import sys
from pathlib import Path

from simcast.calib.fitting import fit_kernels as fk
from simcast.calib.fitting.from_db import SYSTEMS, engine_data
from simcast.calib.fitting.from_db_moe import fit_moe, moe_engine_data, predict_moe
from simcast.calib.profiles.profile_doc import num
from simcast.calib.readers.db_split import errors, held_out
from simcast.core.dtypes import PEAK_DTYPE
from simcast.core.errors import SimcastInputError
from simcast.cost.kernels.gemm import gemm_time_s
from simcast.engines import ENGINES, get_engine
from simcast.inputs.loaders import load_device, profiles_dir

FAMILY = "nvfp4"


def _num(v: float) -> str:
    return num(v).text  # the profile writer's own number format


def _line(fit, skip: tuple[str, ...] = ()) -> str:
    """One fit as the profile writes it: a flow mapping, defaults of the optional fields left out."""
    from dataclasses import fields

    parts = []
    for f in fields(fit):
        v = getattr(fit, f.name)
        if f.name in skip and v == f.default:
            continue
        if isinstance(v, str):
            if v or f.name == "dtype":
                parts.append(f"{f.name}: {v}")
        elif isinstance(v, bool):
            parts.append(f"{f.name}: {str(v).lower()}")
        elif isinstance(v, int):
            parts.append(f"{f.name}: {v}")
        elif f.name in ("half_m", "half_k", "half_n", "half_rows", "parallel_exp") and v == 0:
            parts.append(f"{f.name}: 0.0")
        else:
            parts.append(f"{f.name}: {_num(float(v))}")
    return "{" + ", ".join(parts) + "}"


def fit_system(system: str) -> dict[str, dict]:
    """{engine: {"gemm": (line, err), "moe": (line, err), "tables": [...]}} for the nvfp4 family."""
    info = SYSTEMS[system]
    dev = load_device(info.profile)
    peak = dev.matmul_peak(PEAK_DTYPE[FAMILY])
    out: dict[str, dict] = {}
    for engine in ENGINES:
        try:
            get_engine(engine).check_device(dev)  # ATOM runs on AMD only: no fit of it on an NVIDIA system
        except SimcastInputError:
            continue
        got: dict = {"tables": []}
        data = engine_data(system, engine)
        rows = data.gemm[data.gemm["dtype"] == FAMILY] if len(data.gemm) else data.gemm
        if len(rows) >= 50:
            h = held_out(rows)
            g, _ = fk.fit_gemm(rows[~h], dev, FAMILY, info.sm_count, None, l2_edge=False)
            t = rows[h]
            err = errors(gemm_time_s(g, peak, dev.hbm_bw_bytes_per_s, t["m"], t["n"], t["k"]), t["time_s"])
            got["gemm"] = (
                _line(g, ("tile_rule", "step_s", "host_floor_s", "l2_edge", "tile_m", "tile_n", "tile_k")),
                err,
            )
            got["tables"].append(str(rows["source"].iloc[0]).rsplit("/", 1)[0] + " nvfp4 rows")
        moe, _, tables = moe_engine_data(system, engine)
        mrows = moe[moe["dtype"] == FAMILY] if len(moe) else moe
        if len(mrows) >= 50:
            h = held_out(mrows)
            f, _ = fit_moe(mrows[~h], dev, FAMILY, info.sm_count)
            err = errors(predict_moe(f, mrows[h], dev), mrows[h]["time_s"])
            got["moe"] = (_line(f, ("block_m", "tile_n", "sm_count", "routed_pair_s")), err)
            got["tables"] += [t for t in tables if "/moe/" in t]
        if "gemm" in got or "moe" in got:
            out[engine] = got
    return out


def write(system: str, fits: dict[str, dict]) -> None:
    """Insert the lines after each engine section's last gemm / moe entry, and the errors into its
    ``fit_abs_err_pct`` map."""
    p = Path(profiles_dir()) / f"{SYSTEMS[system].profile}.yaml"
    lines = p.read_text().split("\n")
    for engine, got in fits.items():
        start = lines.index(f"  {engine}:")
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("  ") and not lines[i].startswith("   ")),
            len(lines),
        )
        for kind in ("gemm", "moe"):
            if kind not in got:
                continue
            line, (med, p90) = got[kind]
            head = next(i for i in range(start, end) if lines[i].startswith(f"    {kind}:"))
            last = head
            while last + 1 < end and lines[last + 1].startswith("      - "):
                last += 1
            src = "; ".join(got["tables"])
            note = (
                f"  # fit on {src} (aiconfigurator-core 0.12.0, even half); held-out median {med:.1f}%, p90 {p90:.1f}%"
            )
            lines.insert(last + 1, f"      - {line}{note}")
            end += 1
            err_i = next(i for i in range(start, end) if lines[i].startswith("    fit_abs_err_pct: {"))
            close = lines[err_i].index("}  #")
            sep = "" if lines[err_i][close - 1] == "{" else ", "  # a section with no fit yet (GB300)
            lines[err_i] = lines[err_i][:close] + f"{sep}{kind}.{FAMILY}: [{med:.1f}, {p90:.1f}]" + lines[err_i][close:]
    p.write_text("\n".join(lines))


def main(argv: list[str]) -> int:
    do_write = "--write" in argv
    for system in [a for a in argv if not a.startswith("--")]:
        fits = fit_system(system)
        for engine, got in fits.items():
            for kind in ("gemm", "moe"):
                if kind in got:
                    line, (med, p90) = got[kind]
                    print(f"{system} {engine} {kind}: {line}  held-out median {med:.1f}%, p90 {p90:.1f}%")
        if do_write:
            write(system, fits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

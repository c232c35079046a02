"""CLI wiring for ``simcast models`` and ``simcast devices``: what ships (edge module)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from simcast.api.options import Flag, opt
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import emit, emit_json, run_metadata


def _json(what: str) -> bool:
    return opt(False, what, flag=Flag(names=("--json",), help=what, action="store_true", dest="json"))


@dataclass(frozen=True, kw_only=True)
class CatalogFlags:
    """The ``--json`` of ``simcast models``, ``devices`` and ``workloads`` (each lists something else)."""

    models_json: bool = _json("print the list as JSON (params in elements)")
    devices_json: bool = _json("print the list as JSON (with each profile's sha256)")
    workloads_json: bool = _json("print every distribution's summary and provenance as JSON")


def add_models_args(p: argparse.ArgumentParser) -> None:
    add_option_flags(p, CatalogFlags, ("models_json",))


def cmd_models(a: argparse.Namespace) -> int:
    from dataclasses import asdict

    from simcast.inputs.catalog import list_models
    from simcast.render.tables import table

    models = list_models()
    if a.json:
        emit_json({"run": run_metadata(), "models": [asdict(m) for m in models]})
        return 0
    rows = [
        [
            m.name,
            m.architecture,
            f"{m.params / 1e9:.2f}",
            f"MoE, {m.experts} experts" if m.experts else "dense",
            ", ".join(m.aliases),
        ]
        for m in models
    ]
    emit(
        table(["model", "architecture", "params B", "kind", "also accepted as (same config)"], rows, left=(0, 1, 3, 4))
    )
    emit(f"\n{len(models)} models under models/ (sources: models/SOURCES.md); --model also takes a config.json path")
    return 0


def add_devices_args(p: argparse.ArgumentParser) -> None:
    add_option_flags(p, CatalogFlags, ("devices_json",))


def cmd_devices(a: argparse.Namespace) -> int:
    from dataclasses import asdict

    from simcast.inputs.catalog import list_devices
    from simcast.render.tables import table

    devices = list_devices()
    if a.json:
        emit_json({"run": run_metadata(), "devices": [asdict(d) for d in devices]})
        return 0
    rows = [[d.name, d.status, d.efficiency, ", ".join(d.engines) or "-"] for d in devices]
    emit(table(["device", "status", "efficiencies", "engine kernels fitted"], rows, left=(0, 1, 2, 3)))
    emit(
        f"\n{len(devices)} profiles under device_profiles/ (sources: device_profiles/SOURCES.md); status read from "
        "each profile's calibration: and engines: blocks; --device also takes a YAML path"
    )
    return 0

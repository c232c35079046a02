"""What ships: the models and device profiles, and the Instruct/Chat names that resolve to a shipped
base config (``simcast models``, ``simcast devices``; edge module: reads the shipped files).

A device's status is read from its profile, never assumed: ``calibration:`` says whether its
efficiencies were fitted on measurements of this device (``fitted_parameters`` > 0 and no
``method: transfer ...``), carried over from another device, or are datasheet peaks with initial
assumptions; ``engines:`` lists the serving engines whose kernels were fitted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from simcast.core.dtypes import FP4_ACTIVATION_FORMATS
from simcast.core.shards import param_count
from simcast.inputs.aliases import MODEL_ALIASES
from simcast.inputs.files import read_bytes
from simcast.inputs.loaders import (
    load_model,
    profile_path,
    read_yaml,
    shipped_devices,
    shipped_models,
)


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    """One shipped model: its id, architecture and parameter count (elements, all experts)."""

    name: str
    architecture: str
    params: int
    experts: int  # routed experts per MoE layer (0: dense)
    aliases: tuple[str, ...]


def list_models() -> list[ModelEntry]:
    """Every shipped model, by id."""
    out = []
    for name in shipped_models():
        m = load_model(name)
        out.append(
            ModelEntry(
                name=name,
                architecture=m.architecture,
                params=param_count(m),
                experts=m.moe.num_experts if m.moe is not None else 0,
                aliases=tuple(sorted(a for a, b in MODEL_ALIASES.items() if b == name)),
            )
        )
    return out


@dataclass(frozen=True, kw_only=True)
class DeviceEntry:
    """One shipped profile and where its numbers come from (read from its ``calibration:`` and ``engines:``)."""

    name: str
    description: str
    status: str  # "fitted" (some number fitted on this device's measurements) or "unfitted"
    efficiency: str  # fitted on this device | carried over from another | datasheet + initial assumptions
    engines: tuple[str, ...]  # engines with fitted kernels
    sha256: str  # of the profile file


def profile_sha256(name_or_path: str) -> str:
    """SHA-256 of a device profile's file (shipped name or path), for run metadata."""
    return hashlib.sha256(read_bytes(profile_path(name_or_path), "--device")).hexdigest()


def device_status(doc: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """(status, efficiency provenance, fitted engines) of a profile's parsed YAML."""
    cal = doc.get("calibration") or {}
    engines = tuple(doc.get("engines") or {})
    method = str(cal.get("method", ""))
    n = int(cal.get("fitted_parameters", 0) or 0)
    if method.startswith("transfer"):
        eff = f"carried over ({method})"
    elif n > 0:
        eff = f"fitted ({n} parameters, {cal.get('date', 'undated')})"
    else:
        eff = "datasheet peaks + initial assumptions"
    if engines and all(_fp4_gemms_only(v) for v in (doc.get("engines") or {}).values()):
        # GB300: NVFP4 GEMM / MoE fits alone; attention, collectives and 16-bit/fp8 GEMMs stay on priors
        return "unfitted", eff, (*engines[:-1], f"{engines[-1]} (nvfp4 GEMM/MoE only)")
    fitted = engines or (n > 0 and not method.startswith("transfer"))
    return ("fitted" if fitted else "unfitted"), eff, engines


def _fp4_gemms_only(section: Any) -> bool:
    """An ``engines.<engine>`` block that fits FP4-weight GEMMs / MoE experts and nothing else."""
    if not isinstance(section, dict):
        return False
    kinds = {k for k, v in section.items() if isinstance(v, list) and v}
    fits = [f for k in kinds for f in section[k]]
    return kinds <= {"gemm", "moe"} and all(
        isinstance(f, dict) and f.get("dtype") in FP4_ACTIVATION_FORMATS for f in fits
    )


def list_devices() -> list[DeviceEntry]:
    """Every shipped device profile, by name."""
    out = []
    for name in shipped_devices():
        doc = read_yaml(profile_path(name), "device profile")
        status, eff, engines = device_status(doc if isinstance(doc, dict) else {})
        out.append(
            DeviceEntry(
                name=name,
                description=str(doc.get("description", "")) if isinstance(doc, dict) else "",
                status=status,
                efficiency=eff,
                engines=engines,
                sha256=profile_sha256(name),
            )
        )
    return out

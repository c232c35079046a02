"""A device profile's ``engines:`` section -> per-engine fitted kernels (edge module; used by
:mod:`simcast.inputs.loaders`)."""

from __future__ import annotations

from simcast.core.device import CollectiveFit
from simcast.core.errors import require
from simcast.core.kernel_fits import (
    A2A_MODES,
    A2A_PHASES,
    ATTENTION_DTYPES,
    GEMM_DTYPES,
    MOE_DTYPES,
    AllToAllFit,
    DecodeAttentionFit,
    EngineKernels,
    GemmFit,
    MoeFit,
    PrefillAttentionFit,
)
from simcast.engines import ENGINES


def _one_of(value: str, allowed: tuple[str, ...], where: str) -> str:
    require(value in allowed, where, value, f"allowed: {', '.join(allowed)}")
    return value


def engine_kernels(engine: str, sec: dict) -> EngineKernels:
    """An ``engines.<engine>`` section (already schema-checked) as :class:`EngineKernels`."""
    require(engine in ENGINES, "engines", engine, f"allowed: {', '.join(ENGINES)}")
    w = f"engines.{engine}"
    for kind, allowed in (
        ("gemm", GEMM_DTYPES),
        ("prefill", ATTENTION_DTYPES),
        ("decode", ATTENTION_DTYPES),
        ("moe", MOE_DTYPES),
    ):
        for i, f in enumerate(sec.get(kind, ())):
            _one_of(f["dtype"], allowed, f"{w}.{kind}[{i}].dtype")
    for i, a in enumerate(sec.get("all_to_all", ())):
        _one_of(a["mode"], A2A_MODES, f"{w}.all_to_all[{i}].mode")
        _one_of(a["phase"], A2A_PHASES, f"{w}.all_to_all[{i}].phase")
    for i, c in enumerate(sec.get("all_reduce", ())):
        _one_of(c["kind"], ("all_reduce",), f"{w}.all_reduce[{i}].kind")
    return EngineKernels(
        engine=engine,
        source=sec["source"],
        gemm=tuple(GemmFit(**g) for g in sec.get("gemm", ())),
        prefill=tuple(PrefillAttentionFit(**a) for a in sec.get("prefill", ())),
        decode=tuple(DecodeAttentionFit(**a) for a in sec.get("decode", ())),
        all_reduce=tuple(CollectiveFit(**c) for c in sec.get("all_reduce", ())),
        moe=tuple(MoeFit(**m) for m in sec.get("moe", ())),
        all_to_all=tuple(AllToAllFit(**a) for a in sec.get("all_to_all", ())),
    )

"""A profile's ``engines:`` section (per-engine fitted kernels) and NCCL link fits, written into the document.

One flow-style line per fit, each with a note naming the tables it was fitted on and its held-out error, so
every number carries its provenance. Floats are written with an explicit exponent sign
(:func:`simcast.calib.profiles.profile_doc.num`: YAML 1.1 and 1.2 both read them as floats).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from simcast.calib.profiles.profile_doc import (
    AFTER,
    COLLECTIVES_COLUMN,
    DocPath,
    Num,
    delete,
    flow,
    get,
    insert,
    set_value,
)
from simcast.core.kernel_fits import EngineKernels

HEADER_COLUMN = 36  # where the note of an engine's list key (``gemm:``, ``decode:`` ...) starts
ERRS_NOTE = "[median, p90] % on the held-out half (CRC32 of the shape odd), fitted on the other half"

# list key, its note, the fields left out when at their default, the error key of one fit
_LISTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "gemm",
        "simcast.cost.kernels.gemm: per dtype family",
        ("tile_m", "tile_n", "host_floor_s", "tile_rule", "step_s", "tile_k", "l2_edge"),
    ),
    (
        "prefill",
        "simcast.cost.kernels.attention.prefill_time_s: per KV dtype",
        ("tile", "kernel_rule", "cta_s", "sm_count", "l2_boost", "l2_half_bytes", "l2_edge", "half_tile"),
    ),
    (
        "decode",
        "simcast.cost.kernels.attention.decode_time_s: per KV dtype",
        (
            "max_group",
            "group_share",
            "l2_boost",
            "l2_half_bytes",
            "kernel_rule",
            "fallback_wave_s",
            "cta_kv_byte_s",
            "cta_group_s",
            "token_group_s",
            "narrow_launch_s",
            "merge_s",
            "fallback_kv_byte_s",
            "fallback_merge_s",
            "mmha_ctas_per_sm",
            "mmha_block_tokens",
            "l2_edge",
            "gqa_swap_s",
            "gqa_copy_s",
            "diff_kv_launch_s",
            "kv_write_s",
            "kv_write_elem_s",
        ),
    ),
    (
        "all_reduce",
        "the engine's all-reduce as it issues it: t = latency_s + 2(n-1)/n·bytes/bus_bw up to max_bytes (0: unbounded)",
        (),
    ),
    (
        "moe",
        "simcast.cost.kernels.moe_kernels: routed experts per weight format",
        ("block_m", "tile_n", "sm_count", "routed_pair_s"),
    ),
    ("all_to_all", "DeepEP dispatch/combine: latency_s + bytes/bw per mode", ()),
)


def _err_key(kind: str, fit: Any) -> str:
    """The ``fit_abs_err_pct`` key of one fit of list ``kind``."""
    if kind == "all_reduce":
        return "all_reduce"
    if kind == "all_to_all":
        return f"a2a.{fit.mode}.{fit.phase}"
    return f"{kind}.{fit.dtype}"


def _err(errs: Mapping[str, tuple[float, float]], key: str) -> str:
    if key not in errs:
        return ""
    med, p90 = errs[key]
    return f"; held-out median {med:.1f}%, p90 {p90:.1f}%"


def _pair(m: float, p: float) -> CommentedSeq:
    seq = CommentedSeq([Num(m, f"{m:.1f}"), Num(p, f"{p:.1f}")])
    seq.fa.set_flow_style()
    return seq


def _section(ek: EngineKernels, errs: Mapping[str, tuple[float, float]]) -> tuple[CommentedMap, list]:
    """One engine's mapping and the notes of its values: ``[(path below the engine, note, column)]``."""
    sec = CommentedMap()
    sec["source"] = DoubleQuotedScalarString(ek.source)
    pct = CommentedMap((k, _pair(m, p)) for k, (m, p) in errs.items())
    pct.fa.set_flow_style()
    sec["fit_abs_err_pct"] = pct
    notes: list[tuple[DocPath, str, int | None]] = [(("fit_abs_err_pct",), ERRS_NOTE, AFTER)]
    for kind, head, optional in _LISTS:
        fits = getattr(ek, kind)
        if not fits:
            continue
        sec[kind] = CommentedSeq(flow(f, optional) for f in fits)
        notes.append(((kind,), head, HEADER_COLUMN))
        notes += [
            ((kind, i), f"fit on the tables in source{_err(errs, _err_key(kind, f))}", None) for i, f in enumerate(fits)
        ]
    return sec, notes


def engines_note(how: str) -> str:
    return f"per-engine kernels fitted by `{how}` (simcast.core.kernel_fits)"


def set_engines(
    doc: CommentedMap,
    fitted: Mapping[str, tuple[EngineKernels, Mapping[str, tuple[float, float]]]],
    how: str,
    keep: Iterable[str] = (),
) -> None:
    """Replace the profile's ``engines:`` block with the ``fitted`` sections ``{engine: (kernels, {kind:
    (median, p90)})}``; ``how`` names the command. Engines in ``keep`` (in that order) that were not refitted
    keep their old section, unchanged; the block goes before ``calibration:`` (or at the end)."""
    old = doc.get("engines")
    old = old if isinstance(old, CommentedMap) else CommentedMap()
    delete(doc, "engines")
    order = [e for e in keep if e in fitted or e in old] + [e for e in fitted if e not in keep]
    block, notes = CommentedMap(), {}
    for e in order:
        if e in fitted:
            block[e], notes[e] = _section(*fitted[e])
        else:
            block[e] = old[e]
            if e in old.ca.items:
                block.ca.items[e] = old.ca.items[e]
    keys = list(doc)
    insert(doc, keys.index("calibration") if "calibration" in keys else len(keys), "engines", block, engines_note(how))
    for e, section_notes in notes.items():
        for rel, text, column in section_notes:
            path = ("engines", e, *rel)
            set_value(doc, path, get(doc, path), text, column)


def replace_link_collectives(doc: CommentedMap, link: str, fits: tuple, notes: dict[str, str]) -> None:
    """Replace ``links.<link>.collectives`` (moved to the end of that link) with ``fits``.

    ``notes[algorithm]`` (or ``notes[""]``) is the note of each fit. Nothing else is touched.
    """
    if not isinstance(get(doc, ("links", link)), dict):
        raise ValueError(f"profile has no links.{link} block")
    at = ("links", link, "collectives")
    delete(doc, at)
    items = CommentedSeq(flow(f, ("max_bytes", "algorithm")) for f in fits)
    head = "t = latency_s + factor·bytes/bus_bw up to max_bytes (0: unbounded), per collective and group size"
    set_value(doc, at, items, head, column=COLLECTIVES_COLUMN)
    for i, f in enumerate(fits):
        set_value(doc, (*at, i), items[i], notes.get(f.algorithm, notes.get("", "")))

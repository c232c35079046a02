"""Write a profile's ``engines:`` section (per-engine fitted kernels) and NCCL link fits as YAML text.

One flow-style line per fit, each with a comment naming the tables it was
fitted on and its held-out error, so every number carries its provenance.
Floats are written with an explicit exponent sign (YAML 1.1 and 1.2 both read
them as floats).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from simcast.core.kernel_fits import EngineKernels

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_YAML_WORDS = {"yes", "no", "on", "off", "true", "false", "null", "y", "n"}


def _fmt(v: Any) -> str:
    if isinstance(v, str) and _PLAIN.match(v) and v.lower() not in _YAML_WORDS:
        return v  # an identifier (dtype, kind, algorithm): plain, as the hand-written profiles do
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return json.dumps(v)
    if isinstance(v, int):
        return str(v)
    return f"{v:.4e}".replace("e-0", "e-").replace("e+0", "e+") if v else "0.0"


def flow(obj: Any, skip_defaults: tuple[str, ...] = ()) -> str:
    """``{key: value, ...}`` of a dataclass (fields equal to their default in ``skip_defaults`` left out)."""
    parts = []
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if f.name in skip_defaults and v == f.default:
            continue
        parts.append(f"{f.name}: {_fmt(v)}")
    return "{" + ", ".join(parts) + "}"


def _err(errs: dict[str, tuple[float, float]], key: str) -> str:
    if key not in errs:
        return ""
    med, p90 = errs[key]
    return f"; held-out median {med:.1f}%, p90 {p90:.1f}%"


def render_engines(sections: dict[str, tuple[EngineKernels, dict[str, tuple[float, float]]]], how: str) -> str:
    """The ``engines:`` block for ``{engine: (kernels, {kind: (median, p90)})}``; ``how`` names the command."""
    out = [f"engines:                             # per-engine kernels fitted by `{how}` (simcast.core.kernel_fits)"]
    for name, (ek, errs) in sections.items():
        out.append(f"  {name}:")
        out.append(f"    source: {json.dumps(ek.source)}")
        out.append(
            "    fit_abs_err_pct: {"
            + ", ".join(f"{k}: [{m:.1f}, {p:.1f}]" for k, (m, p) in errs.items())
            + "}  # [median, p90] % on the held-out half (CRC32 of the shape odd), fitted on the other half"
        )
        note = "fit on the tables in source{}"
        if ek.gemm:
            out.append("    gemm:                           # simcast.cost.gemm: per dtype family")
            gemm_opt = ("tile_m", "tile_n", "host_floor_s", "tile_rule", "step_s", "tile_k")
            out += [f"      - {flow(g, gemm_opt)}  # {note.format(_err(errs, 'gemm.' + g.dtype))}" for g in ek.gemm]
        if ek.prefill:
            out.append("    prefill:                        # simcast.cost.attention.prefill_time_s: per KV dtype")
            out += [
                f"      - {flow(a, ('tile',))}  # {note.format(_err(errs, 'prefill.' + a.dtype))}" for a in ek.prefill
            ]
        if ek.decode:
            out.append("    decode:                         # simcast.cost.attention.decode_time_s: per KV dtype")
            optional = ("max_group", "group_share", "l2_boost", "l2_half_bytes", "kernel_rule", "fallback_wave_s")
            out += [f"      - {flow(a, optional)}  # {note.format(_err(errs, 'decode.' + a.dtype))}" for a in ek.decode]
        if ek.all_reduce:
            out.append(
                "    all_reduce:                     # the engine's all-reduce as it issues it: "
                "t = latency_s + 2(n-1)/n·bytes/bus_bw up to max_bytes (0: unbounded)"
            )
            out += [f"      - {flow(c)}  # {note.format(_err(errs, 'all_reduce'))}" for c in ek.all_reduce]
        if ek.moe:
            out.append(
                "    moe:                            # simcast.cost.moe_kernels: routed experts per weight format"
            )
            tile = ("block_m", "tile_n", "sm_count", "routed_pair_s")
            out += [f"      - {flow(m, tile)}  # {note.format(_err(errs, 'moe.' + m.dtype))}" for m in ek.moe]
        if ek.all_to_all:
            out.append("    all_to_all:                     # DeepEP dispatch/combine: latency_s + bytes/bw per mode")
            out += [f"      - {flow(a)}  # {note.format(_err(errs, f'a2a.{a.mode}.{a.phase}'))}" for a in ek.all_to_all]
    return "\n".join(out) + "\n"


def _top_level_block(lines: list[str], key: str) -> tuple[int, int] | None:
    start = next((i for i, ln in enumerate(lines) if ln.startswith(f"{key}:")), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " #"):
        end += 1
    return start, end


def replace_engines_block(text: str, block: str | None) -> str:
    """``text`` without its ``engines:`` block, then ``block`` inserted before ``calibration:`` (or at the end)."""
    lines = text.splitlines()
    span = _top_level_block(lines, "engines")
    if span is not None:
        del lines[span[0] : span[1]]
    if block:
        cal = _top_level_block(lines, "calibration")
        at = cal[0] if cal is not None else len(lines)
        lines[at:at] = block.rstrip("\n").splitlines()
    return "\n".join(lines) + "\n"


def replace_link_collectives(text: str, link: str, fits: tuple, notes: dict[str, str]) -> str:
    """Replace ``links.<link>.collectives`` (or add it at the end of that link's block) with ``fits``.

    ``notes[algorithm]`` (or ``notes[""]``) is the comment of each line. Nothing else is touched.
    """
    lines = text.splitlines()
    head = next((i for i, ln in enumerate(lines) if ln.rstrip().split("#")[0].rstrip() == f"  {link}:"), None)
    if head is None:
        raise ValueError(f"profile has no links.{link} block")
    end = head + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith("    ")):
        end += 1
    block = lines[head + 1 : end]
    start = next((i for i, ln in enumerate(block) if ln.strip().startswith("collectives:")), None)
    if start is not None:
        stop = start + 1
        while stop < len(block) and block[stop].strip().startswith("- "):
            stop += 1
        del block[start:stop]
    while block and not block[-1].strip():
        block.pop()
    new = [
        "    collectives:                   # t = latency_s + factor·bytes/bus_bw up to max_bytes (0: unbounded), "
        "per collective and group size"
    ]
    for f in fits:
        note = notes.get(f.algorithm, notes.get("", ""))
        new.append(f"      - {flow(f, ('max_bytes', 'algorithm'))}  # {note}")
    lines[head + 1 : end] = block + new
    return "\n".join(lines) + "\n"


def set_calibration_entry(text: str, key: str, value: dict) -> str:
    """Set ``calibration.<key>`` to ``value`` (one JSON flow line), creating the block if needed."""
    lines = text.splitlines()
    span = _top_level_block(lines, "calibration")
    entry = f"  {key}: {json.dumps(value)}"
    if span is None:
        lines += ["calibration:                         # provenance of the fitted numbers", entry]
    else:
        s, e = span
        body = [ln for ln in lines[s + 1 : e] if not ln.startswith(f"  {key}:")]
        while body and not body[-1].strip():
            body.pop()
        lines[s + 1 : e] = body + [entry]
    return "\n".join(lines) + "\n"

"""Writing a calibrated device profile: the values a run produced, each with its provenance.

The profile's YAML is rewritten line by line so every source comment survives.
Only the values named in ``notes`` change — the ones this run fitted or
carried over; each gets its note (``fit by simcast calibrate on <files>,
median err x%`` or ``carried over from <device>, where ...``) followed by
``; prior <old value>: <old comment>``. Every other line, including values an
earlier run fitted, stays exactly as it was, label and all. The
``calibration:`` block states what this run did and counts fitted values only
(a collective fit holds two numbers, α and β).
"""

from __future__ import annotations

import json

from simcast.calib.fitting.fit import GEMM_PARAMS
from simcast.calib.profiles.engines_yaml import bytes_literal
from simcast.calib.profiles.profile_lines import (
    CARRIED_NOTE,
    FIT_NOTE,
    carried_counts,
    collective_key,
    count_fitted,
    key_line,
    parameters,
    profile_comments,
    walk_profile,
)
from simcast.core.device import DeviceSpec, LinkSpec

LINKS = ("intra_node", "inter_node")
# Efficiency fields a profile file holds; the optional ones are unset at 0 (curves, vector_memory) or None.
EFF_FIELDS = (
    ("matmul", "vector", "memory", "launch_overhead_s")
    + GEMM_PARAMS[1:4]
    + ("vector_memory", "vector_launch_overhead_s")
)
_OPTIONAL = set(GEMM_PARAMS[1:4]) | {"vector_memory", "vector_launch_overhead_s"}
_CALIBRATION_HEAD = "calibration:                         # provenance of the fitted numbers (simcast calibrate)"


# ------------------------------------------------------------------ which values a run produced
def scalar_values(dev: DeviceSpec) -> dict[str, float | None]:
    """The profile values ``simcast calibrate`` may write, by path (None or 0 = an unset optional field)."""
    values: dict[str, float | None] = {f"efficiency.{f}": getattr(dev.efficiency, f) for f in EFF_FIELDS}
    for ln in LINKS:
        link = getattr(dev.links, ln)
        values[f"links.{ln}.latency_s"] = link.latency_s
        values[f"links.{ln}.efficiency"] = link.efficiency
    return values


def collective_paths(dev: DeviceSpec) -> list[str]:
    return [
        collective_key(f"links.{ln}", f.kind, f.gpus, f.algorithm)
        for ln in LINKS
        for f in getattr(dev.links, ln).collectives
    ]


def fitted_paths(errors: dict[str, float]) -> list[str]:
    """The parameter paths a :func:`simcast.calib.fitting.fit.calibrate` run fitted, from its error groups."""
    out: list[str] = []
    for group in errors:
        if group == "gemm":
            out += [f"efficiency.{p}" for p in GEMM_PARAMS]
        elif group == "elementwise":
            out += ["efficiency.vector_memory", "efficiency.vector_launch_overhead_s"]
        elif group.endswith(".p2p"):
            ln = group.split(".")[0]
            out += [f"links.{ln}.latency_s", f"links.{ln}.efficiency"]
        else:  # <link>.<collective>.<gpus>
            out.append(f"links.{group}")
    return out


def _error_group(path: str) -> str:
    if path.startswith("efficiency."):
        return "elementwise" if "vector" in path else "gemm"
    parts = path.split(".")
    return f"{parts[1]}.p2p" if parts[2] in ("latency_s", "efficiency") else ".".join(parts[1:])


def _files_for(group: str, files: list[str]) -> str:
    want = (
        "_mlp.csv"
        if group in ("gemm", "elementwise")
        else ("send_recv.csv" if group.endswith("p2p") else "all_reduce.csv")
    )
    hit = [f for f in files if f.endswith(want)] or files
    return ", ".join(f"../shared/calibration/{f}" if f.startswith("vidur/") else f for f in hit)


def fit_notes(errors: dict[str, float], files: list[str], snapshot: str) -> dict[str, str]:
    """``{path: note}`` for every value a fit produced: the files it used and its median error."""
    snap = f" (vidur snapshot {snapshot})" if any(f.startswith("vidur/") for f in files) else ""
    return {
        p: f"{FIT_NOTE} on {_files_for(_error_group(p), files)}{snap}, median err {errors[_error_group(p)]:.1f}%"
        for p in fitted_paths(errors)
    }


def transfer_notes(src: DeviceSpec, src_text: str, dst: DeviceSpec, dev: DeviceSpec) -> tuple[dict[str, str], int, int]:
    """Notes for a profile carried over from ``src`` (its YAML ``src_text``) to ``dst``.

    Each note says what the value was on ``src`` — read from ``src``'s own line:
    fitted there (with the files and error it names), itself carried over, or an
    uncalibrated prior (with its citation). Returns ``(notes, values carried over,
    of those fitted on src)``; unset optional values get a note too, so the
    writer drops ``dst``'s old line.
    """
    src_lines = profile_comments(src_text)
    tail = f"same kernels, applied to {dst.name}'s own datasheet peaks, HBM and link bandwidths"
    notes, carried, fitted = {}, 0, 0
    scalars = scalar_values(dev)
    for p in list(scalars) + collective_paths(dev):
        value, comment = src_lines.get(p, ("", ""))
        if p.split(".")[-1] in _OPTIONAL and not scalars.get(p):
            notes[p] = f"{CARRIED_NOTE} {src.name}, where it is not set"
            continue
        if comment.startswith(FIT_NOTE):
            how, n_fit = f"where {comment.split('; prior ', 1)[0]}", 1
        elif comment.startswith(CARRIED_NOTE):
            how, n_fit = f"where it was {comment.split('; prior ', 1)[0]}", 0
        else:
            cite = f"{value}: {comment}" if comment else f"{value}, no source comment" if value else "its default"
            how, n_fit = f"where it is an uncalibrated prior ({cite})", 0
        k = parameters([p])
        notes[p] = f"{CARRIED_NOTE} {src.name}, {how}; {tail}"
        carried, fitted = carried + k, fitted + k * n_fit
    return notes, carried, fitted


# ------------------------------------------------------------------ writing
def _fmt(v: float) -> str:
    """A float YAML 1.1 and 1.2 both read as a float (explicit exponent sign)."""
    return f"{v:.4e}".replace("e-0", "e-").replace("e+0", "e+") if v else "0.0"


def _line(lhs: str, comment: str) -> str:
    return f"{lhs.ljust(36)} # {comment}" if comment else lhs


def _prior(comment: str, old: str) -> str:
    """The previous value and its source comment, carried along (never the note of a prior calibration)."""
    comment = comment.lstrip("#").strip()
    if comment.startswith((FIT_NOTE, CARRIED_NOTE)):
        return comment.split("; prior ", 1)[1] if "; prior " in comment else ""
    return f"{old}: {comment}" if comment else old


def _collective_line(f, note: str) -> str:
    regime = (f", max_bytes: {bytes_literal(f.max_bytes)}" if f.max_bytes else "") + (
        f", algorithm: {f.algorithm}" if f.algorithm else ""
    )
    return (
        f"      - {{kind: {f.kind}, gpus: {f.gpus}, latency_s: {_fmt(f.latency_s)}, "
        f"bus_bw_bytes_per_s: {_fmt(f.bus_bw_bytes_per_s)}{regime}}}" + (f"  # {note}" if note else "")
    )


def update_profile_yaml(text: str, dev: DeviceSpec, notes: dict[str, str], provenance: list[str]) -> str:
    """Rewrite a profile's YAML ``text`` with ``dev``'s values at the paths in ``notes``; nothing else changes.

    A rewritten line keeps its old value and comment as ``; prior <value>: <comment>``.
    An optional efficiency field that ``dev`` leaves unset loses its line; one
    new to the profile is added at the end of its section. A link's collective
    fits are listed from ``dev``: those in ``notes`` with their note, the others
    exactly as the old line had them. ``provenance`` lines become the ``calibration`` block.
    """
    values = {p: v for p, v in scalar_values(dev).items() if p in notes}
    old_items = {p: (value, comment) for p, value, comment in walk_profile(text) if value.startswith("{")}
    out: list[str] = []
    stack: list[tuple[int, str]] = []
    seen: set[str] = set()
    skip_deeper: int | None = None

    def is_set(path: str) -> bool:
        v = values[path]
        return v is not None and (bool(v) or path.split(".")[-1] not in _OPTIONAL)

    def close_sections(indent: int) -> None:
        while stack and stack[-1][0] >= indent:
            _, path = stack.pop()
            for key, v in values.items():  # values new to this section go at its end
                if key.rsplit(".", 1)[0] == path and key not in seen and is_set(key):
                    pad = " " * (2 * (path.count(".") + 1))
                    out.append(_line(f"{pad}{key.rsplit('.', 1)[1]}: {_fmt(v or 0.0)}", notes[key]))
                    seen.add(key)
            if path.startswith("links.") and path.count(".") == 1:
                _collectives(path, getattr(dev.links, path.split(".")[1]))

    def _collectives(path: str, link: LinkSpec) -> None:
        if not link.collectives:
            return
        piecewise = " up to max_bytes (0: unbounded)" if any(f.max_bytes for f in link.collectives) else ""
        out.append(
            f"    collectives:                   # t = latency_s + factor·bytes/bus_bw{piecewise}, "
            "per collective and group size"
        )
        for f in link.collectives:
            key = collective_key(path, f.kind, f.gpus, f.algorithm)
            if key not in notes and key in old_items:  # not produced by this run: the old line, label and all
                value, comment = old_items[key]
                out.append(f"      - {value}" + (f"  # {comment}" if comment else ""))
            else:
                out.append(_collective_line(f, notes.get(key, "")))

    for line in text.splitlines():
        if skip_deeper is not None:
            if not line.strip() or (len(line) - len(line.lstrip())) > skip_deeper or line.strip().startswith("-"):
                continue
            skip_deeper = None
        parsed = key_line(line)
        if parsed is None:
            out.append(line)
            continue
        indent, key, value, comment = parsed
        close_sections(indent)
        path = ".".join([p for _, p in stack][-1:] + [key]) if stack else key
        if key == "collectives" or (indent == 0 and key == "calibration"):
            skip_deeper = indent
            continue
        if path in values:
            seen.add(path)
            if is_set(path):
                prior = _prior(comment, value)
                out.append(
                    _line(
                        f"{' ' * indent}{key}: {_fmt(values[path] or 0.0)}",
                        notes[path] + (f"; prior {prior}" if prior else ""),
                    )
                )
            continue
        out.append(line)
        if not value:
            stack.append((indent, path))
    close_sections(-1)
    out.append(_CALIBRATION_HEAD)
    out += [f"  {p}" for p in provenance]
    return "\n".join(out) + "\n"


def fit_provenance(body: str, where: str, date: str, errors: dict[str, float], old_block: dict | None) -> list[str]:
    """The ``calibration:`` block of a fit run: data, date, errors, what this run fitted and what the profile holds.

    ``body`` is the rewritten profile without its block; ``fitted_parameters``
    counts the values it says were fitted (this run or an earlier one on this
    device); an earlier block is kept under ``earlier``.
    """
    lines = [
        f"source: {json.dumps(where)}",
        f"date: {json.dumps(date)}",
        f"fit_median_abs_err_pct: {json.dumps({k: round(v, 2) for k, v in errors.items()})}",
        f"fitted_in_this_run: {parameters(fitted_paths(errors))}",
        f"fitted_parameters: {count_fitted(body)}",
    ]
    if old_block:
        lines.append(f"earlier: {json.dumps({k: v for k, v in old_block.items() if k != 'earlier'}, default=str)}")
    return lines


def transfer_provenance(
    src: DeviceSpec, src_block: dict | None, date: str, carried: int, fitted_on_src: int
) -> list[str]:
    """The ``calibration:`` block of a transfer: nothing fitted here; the source's own block, or that it has none."""
    method = (
        f"transfer from {src.name} (no measurement on this device)"
        if src_block
        else (
            f"transfer from {src.name} (no measurement on this device; {src.name} has no calibration: block, "
            "its values are uncalibrated priors)"
        )
    )
    lines = [f"method: {json.dumps(method)}"]
    if src_block:
        block = {k: v for k, v in src_block.items() if k != "earlier"}
        lines.append(f"source_calibration: {json.dumps(block, default=str)}")
    return lines + [
        f"date: {json.dumps(date)}",
        "fitted_parameters: 0",
        f"carried_over_parameters: {carried}",
        f"carried_over_fitted_on_source: {fitted_on_src}",
    ]


# ------------------------------------------------------------------ counts after another run rewrote lines
def recount_calibration(text: str) -> str:
    """``text`` with its ``calibration:`` counts recomputed from its lines (after a run that replaced some).

    ``fitted_parameters`` is :func:`count_fitted`; a transferred profile's ``carried_over_parameters`` and
    ``carried_over_fitted_on_source`` are recounted from the ``carried over from`` lines left.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("calibration:")), None)
    if start is None:
        lines.append(_CALIBRATION_HEAD)
        start = len(lines) - 1
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " #"):
        end += 1
    carried, fitted_on_src = carried_counts(text)
    counts = {"fitted_parameters": count_fitted(text)}
    block = lines[start + 1 : end]
    if any(ln.startswith("  carried_over_parameters:") for ln in block):
        counts.update(carried_over_parameters=carried, carried_over_fitted_on_source=fitted_on_src)
    for key, n in counts.items():
        at = next((i for i, ln in enumerate(block) if ln.startswith(f"  {key}:")), None)
        if at is None:
            block.append(f"  {key}: {n}")
        else:
            block[at] = f"  {key}: {n}"
    lines[start + 1 : end] = block
    return "\n".join(lines) + "\n"

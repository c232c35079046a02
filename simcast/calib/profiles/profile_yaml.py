"""Writing a calibrated device profile: the values a run produced, each with its provenance.

The profile is a round-trip YAML document (:mod:`simcast.calib.profiles.profile_doc`), so every source
comment survives. Only the values named in ``notes`` change — the ones this run fitted or carried over;
each gets its note (``fit by simcast calibrate on <files>, median err x%`` or ``carried over from <device>,
where ...``) followed by ``; prior <old value>: <old note>``, set by
:func:`~simcast.calib.profiles.profile_doc.set_value`. Every other value, including values an earlier run
fitted, stays exactly as it was, note and all. The ``calibration:`` block states what this run did and
counts fitted values only (a collective fit holds two numbers, α and β), read from the notes
(:mod:`simcast.calib.profiles.profile_notes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from simcast.calib.fitting.fit import GEMM_PARAMS
from simcast.calib.profiles.profile_doc import (
    COLLECTIVES_COLUMN,
    delete,
    dump_doc,
    flow,
    get,
    json_flow,
    note,
    set_value,
    text_of,
)
from simcast.calib.profiles.profile_notes import (
    CARRIED_NOTE,
    FIT_NOTE,
    carried_counts,
    collective_key,
    count_fitted,
    parameters,
    values_with_notes,
)
from simcast.core.device import DeviceSpec, LinkSpec
from simcast.inputs.loaders import device_from_text

LINKS = ("intra_node", "inter_node")
# Efficiency fields a profile file holds; the optional ones are unset at 0 (curves, vector_memory) or None.
EFF_FIELDS = (
    ("matmul", "vector", "memory", "launch_overhead_s")
    + GEMM_PARAMS[1:4]
    + ("vector_memory", "vector_launch_overhead_s")
)
_OPTIONAL = set(GEMM_PARAMS[1:4]) | {"vector_memory", "vector_launch_overhead_s"}
CALIBRATION_NOTE = "provenance of the fitted numbers (simcast calibrate)"


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


def transfer_notes(
    src: DeviceSpec, src_doc: CommentedMap, dst: DeviceSpec, dev: DeviceSpec
) -> tuple[dict[str, str], int, int]:
    """Notes for a profile carried over from ``src`` (its loaded profile ``src_doc``) to ``dst``.

    Each note says what the value was on ``src`` — read from ``src``'s own note:
    fitted there (with the files and error it names), itself carried over, or an
    uncalibrated prior (with its citation). Returns ``(notes, values carried over,
    of those fitted on src)``; unset optional values get a note too, so the
    writer drops ``dst``'s old value.
    """
    src_lines = values_with_notes(src_doc)
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
def _prior(comment: str, old: str) -> str:
    """The previous value and its source note, carried along (never the note of a prior calibration)."""
    comment = comment.lstrip("#").strip()
    if comment.startswith((FIT_NOTE, CARRIED_NOTE)):
        return comment.split("; prior ", 1)[1] if "; prior " in comment else ""
    return f"{old}: {comment}" if comment else old


def _set_collectives(doc: CommentedMap, ln: str, link: LinkSpec, notes: dict[str, str]) -> None:
    """``links.<ln>.collectives`` from ``link`` (moved to the end of the link): fits in ``notes`` with their
    note, the others exactly as the profile had them, note and all."""
    path = f"links.{ln}"
    old = {p: (v, n) for p, v, n in _link_items(doc, ln)}
    delete(doc, (*path.split("."), "collectives"))
    if not link.collectives:
        return
    items = CommentedSeq()
    kept: list[str] = []
    for f in link.collectives:
        key = collective_key(path, f.kind, f.gpus, f.algorithm)
        keep = key not in notes and key in old
        items.append(old[key][0] if keep else flow(f, ("max_bytes", "algorithm")))
        kept.append(old[key][1] if keep else notes.get(key, ""))
    piecewise = " up to max_bytes (0: unbounded)" if any(f.max_bytes for f in link.collectives) else ""
    at = ("links", ln, "collectives")
    head = f"t = latency_s + factor·bytes/bus_bw{piecewise}, per collective and group size"
    set_value(doc, at, items, head, column=COLLECTIVES_COLUMN)
    for i, (item, n) in enumerate(zip(items, kept)):
        set_value(doc, (*at, i), item, n)


def _link_items(doc: CommentedMap, ln: str) -> list[tuple[str, Any, str]]:
    seq = get(doc, ("links", ln, "collectives"))
    if not isinstance(seq, list):
        return []
    at = ("links", ln, "collectives")
    return [
        (collective_key(f"links.{ln}", c.get("kind"), c.get("gpus"), c.get("algorithm")), c, note(doc, (*at, i)))
        for i, c in enumerate(seq)
        if isinstance(c, dict)
    ]


def update_profile(doc: CommentedMap, dev: DeviceSpec, notes: dict[str, str]) -> None:
    """Set ``dev``'s values at the paths in ``notes`` in the profile ``doc``; nothing else changes.

    A replaced value keeps its old value and note as ``; prior <value>: <note>``. An optional efficiency field
    that ``dev`` leaves unset is removed; one new to the profile is added at the end of its section. A link's
    collective fits are listed from ``dev``: those in ``notes`` with their note, the others exactly as the
    profile had them.
    """
    values = {p: v for p, v in scalar_values(dev).items() if p in notes}
    for path, v in values.items():
        section, key = path.rsplit(".", 1)
        parent = get(doc, section)
        if not isinstance(parent, dict):
            continue  # a section the profile does not have is not created
        if v is not None and (bool(v) or key not in _OPTIONAL):
            prior = _prior(note(doc, path), text_of(parent[key])) if key in parent else ""
            set_value(doc, path, float(v), notes[path] + (f"; prior {prior}" if prior else ""))
        else:
            delete(doc, path)
    for ln in LINKS:
        if isinstance(get(doc, ("links", ln)), dict):
            _set_collectives(doc, ln, getattr(dev.links, ln), notes)


def _entry(v: Any) -> Any:
    """A ``calibration:`` entry as JSON writes it: strings double-quoted, mappings and lists on one line."""
    if isinstance(v, str):
        return DoubleQuotedScalarString(v)
    return v if isinstance(v, (bool, int)) else json_flow(v)


def set_calibration(doc: CommentedMap, entries: dict[str, Any], head: str = CALIBRATION_NOTE) -> None:
    """Replace the profile's ``calibration:`` block (at its end) with ``entries``."""
    delete(doc, "calibration")
    set_value(doc, "calibration", CommentedMap((k, _entry(v)) for k, v in entries.items()), head)


def set_calibration_entry(doc: CommentedMap, key: str, value: Any) -> None:
    """Set ``calibration.<key>`` to ``value`` (moved to the block's end), creating the block if needed."""
    if not isinstance(doc.get("calibration"), dict):
        set_calibration(doc, {key: value}, "provenance of the fitted numbers")
        return
    delete(doc, ("calibration", key))
    set_value(doc, ("calibration", key), _entry(value), "")


def fit_provenance(
    doc: CommentedMap, where: str, date: str, errors: dict[str, float], old_block: dict | None
) -> dict[str, Any]:
    """The ``calibration:`` block of a fit run: data, date, errors, what this run fitted and what the profile holds.

    ``doc`` is the updated profile; ``fitted_parameters`` counts the values its notes say were fitted (this run
    or an earlier one on this device); an earlier block is kept under ``earlier``.
    """
    out: dict[str, Any] = {
        "source": where,
        "date": date,
        "fit_median_abs_err_pct": {k: round(v, 2) for k, v in errors.items()},
        "fitted_in_this_run": parameters(fitted_paths(errors)),
        "fitted_parameters": count_fitted(doc),
    }
    if old_block:
        out["earlier"] = {k: v for k, v in old_block.items() if k != "earlier"}
    return out


def transfer_provenance(
    src: DeviceSpec, src_block: dict | None, date: str, carried: int, fitted_on_src: int
) -> dict[str, Any]:
    """The ``calibration:`` block of a transfer: nothing fitted here; the source's own block, or that it has none."""
    method = (
        f"transfer from {src.name} (no measurement on this device)"
        if src_block
        else (
            f"transfer from {src.name} (no measurement on this device; {src.name} has no calibration: block, "
            "its values are uncalibrated priors)"
        )
    )
    out: dict[str, Any] = {"method": method}
    if src_block:
        out["source_calibration"] = {k: v for k, v in src_block.items() if k != "earlier"}
    return out | {
        "date": date,
        "fitted_parameters": 0,
        "carried_over_parameters": carried,
        "carried_over_fitted_on_source": fitted_on_src,
    }


# ------------------------------------------------------------------ counts after another run replaced values
def recount_calibration(doc: CommentedMap) -> None:
    """Recompute the ``calibration:`` counts from the profile's notes (after a run that replaced some).

    ``fitted_parameters`` is :func:`~simcast.calib.profiles.profile_notes.count_fitted`; a transferred
    profile's ``carried_over_parameters`` and ``carried_over_fitted_on_source`` are recounted from the
    ``carried over from`` notes left.
    """
    counts = {"fitted_parameters": count_fitted(doc)}
    block = doc.get("calibration")
    if not isinstance(block, dict):
        set_calibration(doc, counts)
        return
    if "carried_over_parameters" in block:
        carried, fitted_on_src = carried_counts(doc)
        counts.update(carried_over_parameters=carried, carried_over_fitted_on_source=fitted_on_src)
    for key, n in counts.items():
        set_value(doc, ("calibration", key), n, note(doc, ("calibration", key)))


def profile_text(doc: CommentedMap, key: str, entry: dict[str, Any], where: str) -> str:
    """The profile ``doc`` with ``calibration.<key>`` set to ``entry`` and the block's counts recomputed
    (:func:`recount_calibration`), as YAML text that loads as a device (else one input error naming ``where``):
    checked before it replaces a file."""
    set_calibration_entry(doc, key, entry)
    recount_calibration(doc)
    text = dump_doc(doc)
    device_from_text(text, where)
    return text


def write_profile(path: Path, doc: CommentedMap, key: str, entry: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` with its ``calibration.<key>`` entry (:func:`profile_text`, checked first) and
    say so (the fitting scripts' last step)."""
    path.write_text(profile_text(doc, key, entry, str(path)))
    print(f"wrote {path.name}")

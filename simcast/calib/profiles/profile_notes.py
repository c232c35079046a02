"""What a profile's notes say: the values fits produced or carried over, read from the loaded document.

A note is a value's end-of-line comment (:func:`simcast.calib.profiles.profile_doc.note`); the writer starts
each with :data:`FIT_NOTE` or :data:`CARRIED_NOTE` (:mod:`simcast.calib.profiles.profile_yaml`), so the counts
in a profile's ``calibration:`` block are recounted from the notes themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from simcast.calib.profiles.profile_doc import DocPath, note, text_of

FIT_NOTE = "fit by simcast calibrate"
CARRIED_NOTE = "carried over from"


def collective_key(link_path: str, kind: object, gpus: object, algorithm: object = "") -> str:
    """Path of one collective fit: ``links.<link>.<kind>.<gpus>``, plus ``.<algorithm>`` for a regime of a
    piecewise curve (several fits of one kind and group size, e.g. ``nccl_small`` and ``nccl_large``)."""
    return f"{link_path}.{kind}.{gpus}" + (f".{algorithm}" if algorithm else "")


def _block(node: Any) -> bool:
    """A mapping or list written over several lines (not a one-line ``{...}`` or ``[...]``)."""
    return isinstance(node, (CommentedMap, CommentedSeq)) and not node.fa.flow_style()


def walk(doc: CommentedMap) -> Iterator[tuple[str, DocPath, Any, str]]:
    """``(name, path, value, note)`` of every one-line value and link collective of a profile.

    Names are dotted paths (``efficiency.matmul``, ``links.intra_node.latency_s``); a collective of
    ``links.<link>.collectives`` is named ``links.<link>.<kind>.<gpus>[.<algorithm>]`` (:func:`collective_key`),
    with its whole mapping as value. ``path`` is where the value is in ``doc`` (keys and list indices). Lists
    elsewhere (the ``engines:`` kernel fits) are not walked.
    """

    def visit(path: DocPath, node: CommentedMap) -> Iterator[tuple[str, DocPath, Any, str]]:
        for k, v in node.items():
            p = (*path, k)
            if _block(v) and isinstance(v, CommentedMap):
                yield from visit(p, v)
            elif _block(v):
                if len(p) == 3 and p[0] == "links" and k == "collectives":
                    for i, item in enumerate(v):
                        if isinstance(item, dict):
                            link = f"links.{p[1]}"
                            key = collective_key(link, item.get("kind"), item.get("gpus"), item.get("algorithm"))
                            yield key, (*p, i), item, note(doc, (*p, i))
            else:
                yield ".".join(map(str, p)), p, v, note(doc, p)

    yield from visit((), doc)


def values_with_notes(doc: CommentedMap) -> dict[str, tuple[str, str]]:
    """``{path: (value as written, note)}`` of a profile (see :func:`walk`)."""
    return {path: (text_of(value), n) for path, _at, value, n in walk(doc)}


def parameters(paths: list[str] | set[str]) -> int:
    """Numbers behind ``paths``: one per scalar, two (α, β) per collective ``links.<link>.<kind>.<gpus>[.<alg>]``."""
    return sum(2 if p.startswith("links.") and p.count(".") >= 3 else 1 for p in paths)


def _size(value: Any) -> int:
    return 2 if isinstance(value, dict) else 1  # a collective fit holds two numbers, α and β


def count_fitted(doc: CommentedMap) -> int:
    """Values whose note says a fit produced them (``fit by simcast calibrate``); a collective fit counts two."""
    return sum(_size(v) for _p, _at, v, n in walk(doc) if n.startswith(FIT_NOTE))


def link_fitted_here(doc: CommentedMap, link: str) -> bool:
    """Whether ``links.<link>`` holds collective fits an earlier run made on this device's own measured CSVs
    (``fit by simcast calibrate on ...``; a ``--from-db`` fit of the same database may be refreshed)."""
    return any(
        p.startswith(f"links.{link}.")
        and isinstance(v, dict)
        and n.startswith(FIT_NOTE)
        and not n.startswith(f"{FIT_NOTE} --from-db")
        for p, _at, v, n in walk(doc)
    )


def carried_counts(doc: CommentedMap) -> tuple[int, int]:
    """(values carried over from another profile, of those fitted there), from the values' own notes."""
    carried = fitted = 0
    for _p, _at, v, n in walk(doc):
        if n.startswith(CARRIED_NOTE):
            carried += _size(v)
            fitted += _size(v) if "where fit by simcast calibrate" in n else 0
    return carried, fitted

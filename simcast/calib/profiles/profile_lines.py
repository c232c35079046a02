"""Reading a device profile's YAML line by line: each value's path, text and source comment, and counts of
the values fits produced or carried over (the notes :mod:`simcast.calib.profiles.profile_yaml` writes).

A profile is read as lines, not as YAML, so every source comment stays attached to its value.
"""

from __future__ import annotations

from collections.abc import Iterator

from simcast.core.errors import SimcastInputError
from simcast.inputs.files import loads_yaml

FIT_NOTE = "fit by simcast calibrate"
CARRIED_NOTE = "carried over from"


# ------------------------------------------------------------------ reading a profile's lines
def key_line(line: str) -> tuple[int, str, str, str] | None:
    """(indent, key, value text, comment) of a ``key: value  # comment`` line; None for other lines."""
    body = line.split("#", 1)[0]
    if ":" not in body or body.strip().startswith("-"):
        return None
    indent = len(line) - len(line.lstrip())
    key, _, value = body.strip().partition(":")
    return indent, key.strip(), value.strip(), line.split("#", 1)[1] if "#" in line else ""


def collective_key(link_path: str, kind: object, gpus: object, algorithm: object = "") -> str:
    """Path of one collective fit: ``links.<link>.<kind>.<gpus>``, plus ``.<algorithm>`` for a regime of a
    piecewise curve (several fits of one kind and group size, e.g. ``nccl_small`` and ``nccl_large``)."""
    return f"{link_path}.{kind}.{gpus}" + (f".{algorithm}" if algorithm else "")


def walk_profile(text: str) -> Iterator[tuple[str, str, str]]:
    """``(path, value text, comment)`` of every key line and collective item of a profile.

    Paths are dotted (``efficiency.matmul``, ``links.intra_node.latency_s``);
    a collective item is ``links.<link>.<kind>.<gpus>[.<algorithm>]`` (:func:`collective_key`) with its
    whole flow mapping as value.
    """
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        comment = line.split("#", 1)[1].strip() if "#" in line else ""
        if stripped.startswith("- {"):
            try:  # one line of a profile that already loaded; a flow mapping split over lines is skipped
                item = loads_yaml(stripped[2:], "device profile")
            except SimcastInputError:
                item = None
            if not isinstance(item, dict):
                continue
            link = next((p for _, p in reversed(stack) if p.count(".") == 1 and p.startswith("links.")), None)
            if link is not None:  # items of other lists (the engines: fits) are not link collectives
                yield (
                    collective_key(link, item.get("kind"), item.get("gpus"), item.get("algorithm")),
                    stripped[2:],
                    comment,
                )
            continue
        parsed = key_line(line)
        if parsed is None:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([p for _, p in stack][-1:] + [parsed[1]])
        yield path, parsed[2], comment
        if not parsed[2]:
            stack.append((indent, path))


def profile_comments(text: str) -> dict[str, tuple[str, str]]:
    """``{path: (value text, comment)}`` of a profile's YAML text (see :func:`walk_profile`)."""
    return {path: (value, comment) for path, value, comment in walk_profile(text)}


def count_fitted(text: str) -> int:
    """Values whose line says a fit produced them (``fit by simcast calibrate``); a collective fit counts two."""
    n = 0
    for _path, value, comment in walk_profile(text):
        if comment.startswith(FIT_NOTE):
            n += 2 if value.startswith("{") else 1
    return n


def parameters(paths: list[str] | set[str]) -> int:
    """Numbers behind ``paths``: one per scalar, two (α, β) per collective ``links.<link>.<kind>.<gpus>[.<alg>]``."""
    return sum(2 if p.startswith("links.") and p.count(".") >= 3 else 1 for p in paths)


# ------------------------------------------------------------------ counts of fitted and carried-over values
def link_fitted_here(text: str, link: str) -> bool:
    """Whether ``links.<link>`` holds collective fits an earlier run made on this device's own measured CSVs
    (``fit by simcast calibrate on ...``; a ``--from-db`` fit of the same database may be refreshed)."""
    return any(
        path.startswith(f"links.{link}.")
        and value.startswith("{")
        and comment.startswith(FIT_NOTE)
        and not comment.startswith(f"{FIT_NOTE} --from-db")
        for path, value, comment in walk_profile(text)
    )


def carried_counts(text: str) -> tuple[int, int]:
    """(values carried over from another profile, of those fitted there), from the lines' own notes."""
    carried = fitted = 0
    for _path, value, comment in walk_profile(text):
        if comment.startswith(CARRIED_NOTE):
            k = 2 if value.startswith("{") else 1
            carried += k
            fitted += k if "where fit by simcast calibrate" in comment else 0
    return carried, fitted

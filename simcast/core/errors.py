"""The one error type simcast raises for bad input.

Every message names the field, the bad value and what is allowed, on one line;
the CLI prints it and exits with code 2, without a traceback. The bad value is
quoted by :func:`bounded_repr`, which looks at no more than it prints: a
YAML alias bomb or a million-element list costs as much as a short string.
:func:`printable` replaces control characters: the schema refuses names that need it, and every
printer (the CLI's :func:`simcast.cli.outputs.emit`) passes its text through it, since names come from
user files (a config.json's ``_name_or_path``, a profile's ``name``) and an escape sequence in one would
reach the terminal.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

VALUE_CHARS = 80
"""Characters of the bad value an error message quotes (the rest is cut, marked ``...``)."""
_TEXT_CHARS = 1000  # field names and the "allowed" part: long lists of shipped names fit, a pasted file does not


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
"""C0 and C1 control characters (ESC starts a terminal escape sequence) but newline and tab, DEL,
zero-width characters and the bidirectional overrides (they reorder what a line appears to say)."""


def printable(text: str) -> str:
    """``text`` without control characters (see ``_CONTROL``): each is replaced by ``?``."""
    return _CONTROL.sub("?", text)


def bounded_repr(value: Any, limit: int = VALUE_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, computed from at most ~``limit`` items.

    Containers are walked item by item only while characters remain, so the
    cost is bounded by ``limit`` whatever the value holds (never the built-in
    ``repr`` of a container: it expands everything first). Small values read
    exactly as ``repr`` prints them.
    """
    parts: list[str] = []
    _emit(value, parts, limit + 4)
    s = "".join(parts)
    return s if len(s) <= limit else s[: max(limit - 3, 0)] + "..."


def _emit(v: Any, out: list[str], budget: int) -> int:
    """Append a repr of ``v`` of about ``budget`` characters to ``out``; returns the budget left.

    Recursion depth is bounded by ``budget`` too: every level spends at least one character.
    """
    if budget <= 0:
        return 0
    if v is None or isinstance(v, (bool, float)):
        s = repr(v)
    elif isinstance(v, int):  # huge ints: int -> str is quadratic (and capped at 4300 digits by Python)
        s = repr(v) if v.bit_length() <= 256 else f"<{'-' if v < 0 else ''}integer of {v.bit_length()} bits>"
    elif isinstance(v, (str, bytes, bytearray)):
        s = repr(v[: budget + 2])
        if len(v) > budget + 2:
            s = s[:-1]  # leave the quote open: the value goes on
    elif isinstance(v, PurePath):
        s = f"{type(v).__name__}({str(v)[: budget + 2]!r})"
    elif isinstance(v, (list, tuple, set, frozenset, dict)):
        return _emit_container(v, out, budget)
    else:  # never call an arbitrary object's repr: it may be as big as its contents
        s = f"<{type(v).__name__}>"
    out.append(s)
    return budget - len(s)


def _emit_container(v: Any, out: list[str], budget: int) -> int:
    if isinstance(v, dict):
        opening, closing = "{", "}"
    elif isinstance(v, list):
        opening, closing = "[", "]"
    elif isinstance(v, tuple):
        opening, closing = "(", ")"
    else:
        if not v:
            out.append(f"{type(v).__name__}()")
            return budget - len(out[-1])
        opening, closing = "{", "}"
    out.append(opening)
    budget -= 1
    n = 0
    for item in v.items() if isinstance(v, dict) else v:
        if budget <= 0:
            out.append("...")
            return 0
        if n:
            out.append(", ")
            budget -= 2
        if isinstance(v, dict):
            budget = _emit(item[0], out, budget)
            out.append(": ")
            budget = _emit(item[1], out, budget - 2)
        else:
            budget = _emit(item, out, budget)
        n += 1
    if isinstance(v, tuple) and n == 1:
        out.append(",")
        budget -= 1
    out.append(closing)
    return budget - 1


def one_line(text: str, limit: int = _TEXT_CHARS) -> str:
    """``text`` on one line (newlines and tabs become spaces), cut to ``limit`` characters."""
    text = str(text)[: limit + 1]
    text = " ".join(text.split()) if any(c in text for c in "\n\r\t\v\f") else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SimcastInputError(ValueError):
    """Bad user input: a flag, a YAML/JSON/CSV field, a model config or a device profile."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{one_line(field, 200)}: got {bounded_repr(value)}; {one_line(allowed)}")

    def __reduce__(self) -> tuple:
        """Pickle by the constructor's arguments: an error raised in a pool or Ray worker reaches the CLI
        as the same one-line error (the default reduce passes only the message and fails to rebuild)."""
        return (type(self), (self.field, self.value, self.allowed))


def require(cond: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`SimcastInputError` unless ``cond`` holds."""
    if not cond:
        raise SimcastInputError(field, value, allowed)

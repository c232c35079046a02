"""The one error type simcast raises for bad input.

Every message names the field, the bad value and what is allowed, on one line;
the CLI prints it and exits with code 2, without a traceback.
"""

from __future__ import annotations

from typing import Any


class SimcastInputError(ValueError):
    """Bad user input: a flag, a YAML/JSON key, a model config or a device profile."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: got {value!r}; {allowed}")


def require(cond: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`SimcastInputError` unless ``cond`` holds."""
    if not cond:
        raise SimcastInputError(field, value, allowed)

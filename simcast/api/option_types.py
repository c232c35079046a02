"""The type check of a one-call's keywords, against the options dataclass's annotations.

A keyword of the wrong type (``batch_size=None``, ``tp="2"``, ``batch_sizes=object()``) is one
:class:`SimcastInputError` naming the keyword, before any work: never a ``TypeError`` from deep inside.
A list-valued keyword (``Sequence[int]``) also takes one value: ``batch_sizes=8`` is ``batch_sizes=(8,)``.
Ranges and allowed values are checked where the options are used (``check_int``/``check_float``, the
specs' ``__post_init__``), in the CLI's words: errors there name the flag (``--tp``); a type error here
names the keyword, which has no flag of that type.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, Union

from simcast.core.errors import SimcastInputError

OptionsT = TypeVar("OptionsT")

CLI = "cli"
"""The metadata key of an options field's CLI flag (:class:`simcast.api.options.Flag`)."""


FLAGS: dict[str, str] = {
    "prefix_caching": "--enable-prefix-caching",
}
"""The CLI flag of a keyword without a :class:`~simcast.api.options.Flag` of its own (the shared flags the CLI
declares in its helpers) whose flag is not ``--`` + its name with dashes (errors name the flag, as the range
checks do)."""
NAMED_BY_KEYWORD = frozenset({"model", "device", "fabric", "progress", "engine_settings"})
"""Keywords errors name as written: ``model``/``device``/``fabric`` also take objects no flag takes (the
resolvers name them so too), no flag sets ``progress``, and ``engine_settings`` is set by each engine's own
flags (simcast.engines.flags)."""


def flag_of(cls: type, name: str) -> str:
    """The flag errors name for keyword ``name`` of the options class ``cls`` (the keyword when none)."""
    if name in NAMED_BY_KEYWORD or (cls.__name__, name) == ("StepOptions", "dp"):  # simulate has no --dp
        return name
    flag = next((f.metadata.get(CLI) for f in dataclasses.fields(cls) if f.name == name), None)
    if flag is not None:  # the field declares its flag (api/options.py Flag): the flag's first name
        return str(flag.names[0])
    return FLAGS.get(name, "--" + name.replace("_", "-"))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _arms(hint: Any) -> tuple[Any, ...]:
    """The alternatives of a union hint (``int | None``: int, NoneType); the hint itself otherwise."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _is_sequence(hint: Any) -> bool:
    return typing.get_origin(hint) in (Sequence, list, tuple)


def accepts(value: Any, hint: Any) -> bool:
    """``value`` is of type ``hint`` (ints are numbers, bools are not; a string is not a sequence)."""
    for arm in _arms(hint):
        origin = typing.get_origin(arm)
        if arm is Any:
            return True
        if arm is type(None):
            ok = value is None
        elif arm is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif arm is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif origin is Literal:  # the type here; which value is allowed is checked where it is used (naming the flag)
            ok = any(type(value) is type(a) for a in typing.get_args(arm))
        elif _is_sequence(arm):
            (item, *_) = typing.get_args(arm) or (Any,)
            ok = isinstance(value, list | tuple) and all(accepts(v, item) for v in value)
        elif origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
            ok = isinstance(value, Mapping)
        else:
            ok = isinstance(arm, type) and isinstance(value, arm)
        if ok:
            return True
    return False


def describe(hint: Any) -> str:
    """``hint`` in words: "an integer or None", "a list of integers (or one)", "one of 'a', 'b'"."""
    words = []
    for arm in _arms(hint):
        if arm is type(None):
            words.append("None")
        elif arm is int:
            words.append("an integer")
        elif arm is float:
            words.append("a number")
        elif arm is bool:
            words.append("True or False")
        elif arm is str:
            words.append("a string")
        elif typing.get_origin(arm) is Literal:
            words.append("one of " + ", ".join(repr(a) for a in typing.get_args(arm)))
        elif _is_sequence(arm):
            item = (typing.get_args(arm) or (Any,))[0]
            words.append(f"a list of {describe(item).removeprefix('an ').removeprefix('a ')}s (or one)")
        else:
            words.append(f"a {getattr(typing.get_origin(arm) or arm, '__name__', str(arm))}")
    return " or ".join(words)


def check_option_types(options: OptionsT) -> OptionsT:
    """``options`` (a frozen options dataclass) with every field of its annotated type, a single value of a
    list-valued field made a one-item tuple; else one :class:`SimcastInputError` naming the keyword."""
    cls: type = type(options)
    hints = _hints(cls)
    wrapped: dict[str, Any] = {}
    for f in dataclasses.fields(options):  # type: ignore[arg-type]
        value, hint = getattr(options, f.name), hints.get(f.name, Any)
        if accepts(value, hint):
            continue
        seq = next((a for a in _arms(hint) if _is_sequence(a)), None)
        if seq is not None and accepts(value, (typing.get_args(seq) or (Any,))[0]):
            wrapped[f.name] = (value,)  # batch_sizes=8 is batch_sizes=(8,)
            continue
        raise SimcastInputError(flag_of(cls, f.name), value, f"must be {describe(hint)}")
    return dataclasses.replace(options, **wrapped) if wrapped else options  # type: ignore[type-var]

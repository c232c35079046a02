"""Each one-call's keywords, declared once: a frozen keyword-only options dataclass per call
(``StepOptions``, ``SearchOptions``, ``BenchOptions``) whose fields carry their default and a one-line
doc (:func:`opt`), and :func:`one_call`, which makes the typed keyword function of a run on options.

The keyword function's parameters are the dataclass's (``typing.ParamSpec``), so mypy checks a call's
keywords against the fields (a misspelt keyword is an error), ``help()`` shows the signature and each
field's doc, and the CLI builds the same options object from its flags and runs the same function.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from simcast.api.option_types import CLI as CLI  # the metadata key of a field's CLI flag

P = ParamSpec("P")
T = TypeVar("T")
OptionsT = TypeVar("OptionsT")
R = TypeVar("R")

DOC = "doc"
"""The metadata key of a field's one-line doc."""


@dataclass(frozen=True, kw_only=True)
class Flag:
    """How the CLI reads an options field (the parser is built from it: ``simcast/cli/option_flags.py``):
    ``names`` (the flag, then its aliases), ``help`` (the ``--help`` text, bounds and units in it),
    ``value_type`` (a name in ``simcast.cli.args.VALUE_TYPES``: the bounded argparse type; None: text),
    ``choices``, ``action`` (``store_true``/``store_false`` for a switch), ``nargs`` (a list flag),
    ``metavar`` (None: the flag's name in capitals) and ``dest`` (the parsed flags' attribute; None: the
    field's name)."""

    names: tuple[str, ...]
    help: str
    value_type: str | None = None
    choices: tuple[str, ...] | None = None
    action: str | None = None
    nargs: str | None = None
    metavar: str | None = None
    dest: str | None = None


def opt(default: T, doc: str, *, flag: Flag | None = None) -> T:
    """A field with ``default`` and its one-line ``doc`` (units in it where the field has units), read
    from the CLI by ``flag`` when given."""
    meta: dict[str, Any] = {DOC: doc} if flag is None else {DOC: doc, CLI: flag}
    return dataclasses.field(default=default, metadata=meta)


def required(doc: str, *, flag: Flag | None = None) -> Any:
    """The metadata of a field without a default: ``x: int = field(metadata=required("..."))``."""
    return {DOC: doc} if flag is None else {DOC: doc, CLI: flag}


def _ordered(cls: type) -> list[dataclasses.Field[Any]]:
    """``cls``'s fields as a reader wants them: the required ones, then the call's own, then its bases'
    nearest first (the dataclass puts the most basic class's first)."""
    mro = [c for c in cls.__mro__ if dataclasses.is_dataclass(c)]

    def owner(f: dataclasses.Field[Any]) -> int:
        return next(i for i, c in enumerate(mro) if f.name in c.__dict__.get("__annotations__", {}))

    return sorted(dataclasses.fields(cls), key=lambda f: (f.default is not dataclasses.MISSING, owner(f)))


def option_docs(cls: type) -> str:
    """One line per field of the options dataclass ``cls``: name, default, doc."""
    lines = []
    for f in _ordered(cls):
        default = "required" if f.default is dataclasses.MISSING else f"default {f.default!r}"
        lines.append(f"    {f.name} ({default}): {f.metadata.get(DOC, '')}")
    return "\n".join(lines)


def _signature(cls: type, returns: Any) -> inspect.Signature:
    """``cls``'s keyword parameters with their types resolved where they can be (else as written)."""
    try:
        hints = typing.get_type_hints(cls)
    except NameError:  # a type named only under TYPE_CHECKING: its text
        hints = {}
    params = inspect.signature(cls).parameters
    ordered = [params[f.name] for f in _ordered(cls)]
    return inspect.Signature(
        [p.replace(annotation=hints.get(p.name, p.annotation)) for p in ordered], return_annotation=returns
    )


def one_call(name: str, options: Callable[P, OptionsT], run: Callable[[OptionsT], R]) -> Callable[P, R]:
    """The keyword function ``name`` that builds ``options(**kwargs)`` (its checks run there), checks each
    keyword's type (:func:`simcast.api.option_types.check_option_types`) and returns ``run(options)``; its
    signature is the options', its doc ``run``'s followed by every keyword's."""

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        from simcast.api.option_types import check_option_types

        return run(check_option_types(options(*args, **kwargs)))  # a wrong type: one SimcastInputError

    call.__name__ = call.__qualname__ = name
    call.__module__ = run.__module__
    call.__doc__ = f"{inspect.getdoc(run) or ''}\n\nKeywords ({getattr(options, '__name__', '')}):\n" + option_docs(
        options  # type: ignore[arg-type]
    )
    try:
        returns = typing.get_type_hints(run).get("return", inspect.Signature.empty)
    except NameError:
        returns = inspect.signature(run).return_annotation
    call.__signature__ = _signature(options, returns)  # type: ignore[attr-defined,arg-type]
    return call

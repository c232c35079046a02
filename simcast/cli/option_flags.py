"""Flags generated from the options dataclasses: each field with a :class:`simcast.api.options.Flag` in
its metadata is one argparse flag (names, help, bounded type, choices, default: the field's), and the
parsed flags map back to the options' keywords by the field names (the flag's ``dest``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from simcast.api.options import CLI, Flag
from simcast.cli.args import VALUE_TYPES
from simcast.cli.outputs import PLOT_SUFFIXES, REPORT_SUFFIXES, output_path

PATH_TYPES = {
    "output_path": (),
    "plot_path": PLOT_SUFFIXES,
    "report_path": REPORT_SUFFIXES,
    "csv_path": (".csv",),
    "profile_path": (".yaml", ".yml"),
}
"""The ``value_type`` of an output-file flag (the file's allowed suffixes): a path checked when it is
parsed, errors naming the flag (:func:`simcast.cli.outputs.output_path`)."""


def option_field(cls: type, name: str) -> dataclasses.Field[Any]:
    """The field ``name`` of the options dataclass ``cls`` (it must carry a :class:`Flag`)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if not isinstance(f.metadata.get(CLI), Flag):
        raise TypeError(f"{cls.__name__}.{name} declares no CLI flag")
    return f


def _flag_kwargs(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """The ``add_argument`` keywords of field ``f``: its name as ``dest``, its default (or a switch)."""
    flag: Flag = f.metadata[CLI]
    kw: dict[str, Any] = {"dest": flag.dest or f.name, "help": flag.help}
    if flag.action is not None:
        kw["action"] = flag.action
        return kw
    if f.default is dataclasses.MISSING:
        kw["required"] = True
    else:
        kw["default"] = f.default
    if flag.value_type is not None:
        suffixes = PATH_TYPES.get(flag.value_type)
        kw["type"] = VALUE_TYPES[flag.value_type] if suffixes is None else output_path(flag.names[0], suffixes)
    if flag.nargs is not None:
        kw["nargs"] = flag.nargs
    if flag.choices is not None:
        kw["choices"] = flag.choices
    else:  # argparse names the value after dest; the flag's own name keeps --help as the flag reads
        kw["metavar"] = flag.metavar or flag.names[0].lstrip("-").replace("-", "_").upper()
    return kw


def add_option_flags(p: argparse.ArgumentParser | Any, cls: type, names: tuple[str, ...]) -> None:
    """The flags of ``cls``'s fields ``names``, in that order (the order of ``--help``)."""
    for name in names:
        f = option_field(cls, name)
        p.add_argument(*f.metadata[CLI].names, **_flag_kwargs(f))


def option_values(a: argparse.Namespace, cls: type, names: tuple[str, ...]) -> dict[str, Any]:
    """The keywords ``names`` of the options dataclass ``cls`` from parsed flags (each field's flag's
    ``dest``: its name unless the flag says otherwise)."""
    return {name: getattr(a, option_field(cls, name).metadata[CLI].dest or name) for name in names}

"""Flags generated from the options dataclasses' fields (``Flag`` in their metadata): each field's flag
maps back to the field by name, absent flags give the fields' defaults, and no flag is declared twice."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from simcast.api.bench import BenchOptions
from simcast.api.options import CLI
from simcast.api.search_inputs import SearchOptions
from simcast.api.speculative import SpeculativeOptions
from simcast.api.step import StepOptions
from simcast.cli.optimize_args import OptimizeFlags
from simcast.cli.option_flags import add_option_flags, option_values
from simcast.cli.serve_config import ServeConfigFlags
from simcast.cli.shared_flags import FabricFlags, OutputFlags
from simcast.cli.simulate import SimulateFlags

OPTION_CLASSES = [
    StepOptions,
    BenchOptions,
    SearchOptions,
    SpeculativeOptions,
    FabricFlags,
    OutputFlags,
    OptimizeFlags,
    ServeConfigFlags,
    SimulateFlags,
]


@pytest.mark.parametrize("cls", OPTION_CLASSES)
def test_generated_flags_map_back_to_the_fields(cls):
    names = tuple(f.name for f in dataclasses.fields(cls) if CLI in f.metadata)
    flags = [n for f in dataclasses.fields(cls) if CLI in f.metadata for n in f.metadata[CLI].names]
    assert names and len(flags) == len(set(flags))  # no flag declared twice
    p = argparse.ArgumentParser()
    add_option_flags(p, cls, names)
    required = [f for f in dataclasses.fields(cls) if f.name in names and f.default is dataclasses.MISSING]
    a = p.parse_args([x for f in required for x in (f.metadata[CLI].names[0], "8")])
    got = option_values(a, cls, names)
    for f in dataclasses.fields(cls):  # absent flags give the fields' defaults, a given one its value
        if f.name in names:
            given = 8 if f.metadata[CLI].value_type else "8"  # a required text flag (--model) keeps its text
            assert got[f.name] == (given if f.default is dataclasses.MISSING else f.default), f.name


def test_a_flag_named_unlike_its_field_sets_that_field():
    names = ("batch_size", "residual_send", "chunked_prefill_size", "phase")
    p = argparse.ArgumentParser()
    add_option_flags(p, StepOptions, names)
    a = p.parse_args(["--batch", "3", "--no-residual-send", "--max-num-batched-tokens", "512", "--phase", "decode"])
    got = option_values(a, StepOptions, names)
    assert got == {"batch_size": 3, "residual_send": False, "chunked_prefill_size": 512, "phase": "decode"}
    with pytest.raises(SystemExit):  # the bounded type of the field's flag: at most 10^6 requests
        p.parse_args(["--batch", "1000001"])

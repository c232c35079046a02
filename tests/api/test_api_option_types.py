"""The one-calls' keyword types (issue 25, item 7.6): a keyword of the wrong type is one SimcastInputError
naming the CLI's flag, never a TypeError from deep inside; a list-valued keyword takes a single value."""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import simcast
from simcast.api.bench import BenchOptions
from simcast.api.option_types import accepts, check_option_types, flag_of
from simcast.api.search_inputs import SearchOptions
from simcast.api.step import StepOptions
from simcast.cli.main import make_parser
from simcast.core.errors import SimcastInputError

MODEL, DEVICE = "Qwen/Qwen3-0.6B", "h100_sxm"
CALLS = {
    "simulate": (StepOptions, simcast.simulate_step, {}),
    "optimize": (SearchOptions, simcast.optimize, {"num_devices": 1, "input_length": 64, "output_length": 8}),
    "bench-serve": (BenchOptions, simcast.bench_serve, {"num_prompts": 4}),
}
FIELDS = [(cmd, f.name) for cmd, (cls, _, _) in CALLS.items() for f in dataclasses.fields(cls)]
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.complex_numbers(max_magnitude=5),
    st.lists(st.one_of(st.integers(1, 4), st.text(max_size=2), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(object()),
)


def test_accepts_by_hand():
    assert accepts(3, int) and not accepts(True, int) and not accepts(None, int) and not accepts("3", int)
    assert accepts(3, float) and accepts(0.5, float) and not accepts(False, float)
    assert accepts(None, int | None) and accepts([1, 2], typing.Sequence[int] | None)
    assert not accepts("12", typing.Sequence[int]) and not accepts([1, "a"], typing.Sequence[int])
    assert accepts("decode", typing.Literal["prefill", "decode"]) and not accepts(1, typing.Literal["prefill"])


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(FIELDS), value=WRONG)
def test_a_keyword_of_the_wrong_type_is_one_input_error(case, value):
    """Every keyword of every one-call: a value not of its annotated type (nor one item of a list-valued
    keyword) raises SimcastInputError naming the flag, from the public call, before any work."""
    cmd, name = case
    cls, call, base = CALLS[cmd]
    hint = typing.get_type_hints(cls)[name]
    arms = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, type(int | None)) else (hint,)
    items = [typing.get_args(a)[0] for a in arms if typing.get_origin(a) in (collections.abc.Sequence, list, tuple)]
    assume(not accepts(value, hint) and not any(accepts(value, i) for i in items))
    assume(
        not (name == "engine" and value is None)
    )  # None is "no engine", normalised once (tests/serving/test_spec_scheme.py)
    with pytest.raises(SimcastInputError) as e:
        call(**{"model": MODEL, "device": DEVICE, **base, name: value})
    assert e.value.field == flag_of(cls, name) and e.value.allowed.startswith("must be")


def test_the_named_flags_exist():
    """The flag an error names is one the command has (or the keyword, where no flag sets it)."""
    for cmd, (cls, _, _) in CALLS.items():
        sub = next(a for a in make_parser(cmd)._actions if a.choices).choices[cmd]
        flags = {s for a in sub._actions for s in a.option_strings}
        for f in dataclasses.fields(cls):
            flag = flag_of(cls, f.name)
            assert flag in flags or flag == f.name, (cmd, f.name, flag)


@pytest.mark.parametrize("name", ["batch_size", "tp", "input_length"])
def test_none_for_an_integer_keyword(name):
    with pytest.raises(SimcastInputError, match="must be an integer"):
        simcast.simulate_step(model=MODEL, device=DEVICE, **{name: None})
    with pytest.raises(SimcastInputError, match="must be an integer"):
        simcast.bench_serve(model=MODEL, device=DEVICE, num_prompts=None)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_list_keyword_takes_one_value():
    base = {"model": MODEL, "device": DEVICE, "num_devices": 1, "input_length": 64, "output_length": 8}
    one = simcast.optimize(**base, batch_sizes=8, tp_sizes=1)  # type: ignore[arg-type]
    listed = simcast.optimize(**base, batch_sizes=[8], tp_sizes=[1])
    assert one.to_dict()["rows"] == listed.to_dict()["rows"] and len(one.rows) == 1
    opts = check_option_types(SearchOptions(model=MODEL, device=DEVICE, num_devices=1, batch_sizes=8))  # type: ignore[arg-type]
    assert opts.batch_sizes == (8,)

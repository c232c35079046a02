"""Device spellings of benchmarks and launch scripts resolve to the shipped profiles (inputs/aliases.py)."""

from __future__ import annotations

import pytest

from simcast.core.errors import SimcastInputError
from simcast.inputs.aliases import DEVICE_ALIASES, device_profile_name
from simcast.inputs.loaders import load_device, shipped_devices


def test_spellings():
    assert device_profile_name("H200") == "h200_sxm"
    assert device_profile_name("GB300") == "gb300"
    assert device_profile_name("MI355X") == "mi355x"
    assert device_profile_name("gb200-nvl72") == "gb200"
    assert load_device("B300").name == "b300" and load_device("H100").name == "h100_sxm"


def test_every_alias_names_a_shipped_profile():
    shipped = set(shipped_devices())
    assert set(DEVICE_ALIASES.values()) <= shipped
    assert not set(DEVICE_ALIASES) & shipped  # an alias never hides a profile


def test_unknown_device_is_still_an_error():
    with pytest.raises(SimcastInputError, match="mi999"):
        load_device("mi999")

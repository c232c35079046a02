"""The engine flags are declared by the engine modules and read by the CLI from the registry."""

from __future__ import annotations

import pytest

from simcast.core.errors import SimcastInputError
from simcast.engines import ENGINE_FLAGS, REGISTRY
from simcast.engines.flags import EngineFlag, flags_in_order


def test_every_memory_flag_comes_from_its_engine() -> None:
    mem = [f for f in ENGINE_FLAGS if f.group == "memory"]
    assert [f.name for f in mem] == [e.memory_flag for e in REGISTRY.values() if e.memory_flag]
    assert all(f.dest == "mem_" + f.engine for f in mem)


def test_group_members_are_consecutive() -> None:
    a, b, c = (EngineFlag(names=(n,), dest=n, help="", group=g) for n, g in (("--a", "x"), ("--b", ""), ("--c", "x")))
    assert [f.name for f in flags_in_order([a, b, c])] == ["--a", "--c", "--b"]
    groups = [f.group for f in ENGINE_FLAGS if f.group]
    assert all(groups[i] == groups[i + 1] or groups[i] not in groups[i + 1 :] for i in range(len(groups) - 1))


def test_sglang_owns_disable_radix_cache() -> None:
    f = next(f for f in ENGINE_FLAGS if f.name == "--disable-radix-cache")
    assert f.engine == "sglang" and f.dest == "prefix_caching" and f.group == "prefix_caching"


def test_bounded_flag_refuses_out_of_range_values() -> None:
    f = EngineFlag(names=("--x",), dest="x", help="", check=(1, 10))
    assert f.checked(3) == 3
    with pytest.raises(SimcastInputError):
        f.checked(11)
    with pytest.raises(SimcastInputError):
        f.checked(2.5)

"""The Python API is importable from ``simcast`` itself and returns frozen dataclasses."""

import dataclasses
import subprocess
import sys

import pytest

import simcast


def test_every_public_name_resolves() -> None:
    for name in simcast.__all__:
        assert getattr(simcast, name) is not None


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        simcast.no_such_thing  # noqa: B018


def test_import_is_light() -> None:
    code = "import sys, simcast; print('torch' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_simulate_through_the_top_level_api(h100) -> None:
    spec = simcast.SimSpec(
        model=simcast.load_model("Qwen/Qwen3-0.6B"),
        device=h100,
        parallel=simcast.ParallelSpec(tp=1, pp=2),
        batch=simcast.Batch.prefill(2, 128),
        num_microbatches=2,
    )
    report = simcast.simulate(spec)
    assert dataclasses.is_dataclass(report) and report.latency_s > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.traces_compiled = 3  # type: ignore[misc]


def test_every_public_name_is_typed_for_mypy() -> None:
    """Each lazily loaded name has an import under ``TYPE_CHECKING`` from the module it loads from, so mypy
    sees its type instead of ``Any`` (a name added to ``_API`` alone would fail here)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(simcast))
    typed = {
        (node.module, alias.name)
        for block in tree.body
        if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    wanted = {(module, name) for name, module in simcast._API.items()}
    assert wanted <= typed, sorted(wanted - typed)

"""The package tree is the architecture: imports run one way, down the data flow.

Layers, lowest first (a module may import its own layer and the layers below):
core (specs, layout, plan, memory, schedule) → engines (one module per serving engine: everything it decides)
→ inputs (strict file loading) → trace
(op IR, leaf ops, stage modules, tracer) → cost (ops, kernels, comm) → sim (simulate,
partitions, timeline) → serving (steady state, request level, disagg, speculative, search) → calib (it fits
the serving simulator too) → render → api (the one-call functions) → cli → the package root (``simcast``
re-exports the API: nothing below imports it). Function-local imports count too: a lazy import is still a
dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[2] / "simcast"
LAYERS = ["core", "engines", "deploy", "inputs", "trace", "cost", "sim", "serving", "calib", "render", "api", "cli"]


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(pkg[: len(pkg) - node.level + 1]) if node.level else ""
            mod = ".".join(x for x in (base, node.module or "") if x)
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _graph() -> nx.DiGraph:
    mods = _modules()
    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        for t in _imports(name, path, mods):
            g.add_edge(name, t)
    return g


def _layer(mod: str) -> int | None:
    """A module's layer; the package root (``simcast/__init__.py``, re-exporting the one-call API) and
    ``simcast.__main__`` sit above every layer, so nothing below may import them."""
    parts = mod.split(".")
    if mod in ("simcast", "simcast.__main__"):
        return len(LAYERS)
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_sits_in_a_layer() -> None:
    loose = [m for m in _modules() if m.count(".") >= 1 and _layer(m) is None and m != "simcast.__main__"]
    assert loose == [], f"modules outside the layered subpackages: {loose}"


def test_no_import_cycles() -> None:
    cycles = list(nx.simple_cycles(_graph()))
    assert cycles == [], f"import cycles: {cycles[:5]}"


def test_imports_run_down_the_data_flow() -> None:
    upward = []
    for a, b in _graph().edges:
        la, lb = _layer(a), _layer(b)
        if la is not None and lb is not None and lb > la:
            upward.append(f"{a} -> {b}")
    assert upward == [], "upward imports:\n" + "\n".join(sorted(upward))


def test_pure_layers_never_reach_the_edges() -> None:
    """The RFC's core (core, trace, cost) never imports serving, rendering or the CLI."""
    edges = {"serving", "render", "cli"}
    bad = [
        f"{a} -> {b}"
        for a, b in _graph().edges
        if a.split(".")[1:2]
        and a.split(".")[1] in {"core", "trace", "cost"}
        and b.split(".")[1:2]
        and b.split(".")[1] in edges
    ]
    assert bad == []


def test_package_level_graph_is_acyclic() -> None:
    g = nx.DiGraph()
    for a, b in _graph().edges:
        pa, pb = a.split(".")[1:2], b.split(".")[1:2]
        if pa and pb and pa != pb:
            g.add_edge(pa[0], pb[0])
    assert nx.is_directed_acyclic_graph(g), list(nx.simple_cycles(g))


def test_calib_readers_import_no_other_calib_role() -> None:
    """``calib/readers`` turn files into rows; fitting, validation and profile writing sit on top of them."""
    bad = [
        f"{a} -> {b}"
        for a, b in _graph().edges
        if a.startswith("simcast.calib.readers.")
        and b.startswith("simcast.calib.")
        and not b.startswith("simcast.calib.readers")
    ]
    assert bad == []


def test_tests_are_laid_out_like_the_package() -> None:
    """Every test file sits in ``tests/<layer>/`` for a layer of the package, or ``tests/project/`` (checks of
    the repository as a whole); none at the top of ``tests/`` or in a folder no layer names."""
    tests = PKG.parent / "tests"
    folders = {*LAYERS, "project"}
    stray = [
        str(p.relative_to(tests))
        for p in tests.rglob("test_*.py")
        if len(p.relative_to(tests).parts) != 2 or p.relative_to(tests).parts[0] not in folders
    ]
    assert stray == [], f"test files outside tests/<layer>/ or tests/project/: {stray}"

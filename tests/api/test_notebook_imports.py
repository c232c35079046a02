"""The notebooks use the public API only: every import in a code cell is ``simcast`` itself (never a
subpackage such as ``simcast.serving``), numpy, pandas, matplotlib or the standard library."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
ALLOWED = {"simcast", "numpy", "pandas", "matplotlib"}


def _imports(path: Path) -> list[str]:
    """Every module a code cell imports (IPython magics and shell lines dropped before parsing)."""
    out: list[str] = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in src.split("\n"))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                out += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                out.append("." * node.level + (node.module or ""))
    return out


def _allowed(module: str) -> bool:
    top = module.split(".")[0]
    if top == "simcast":
        return module == "simcast"  # the public API, not its subpackages
    return top in ALLOWED or top in sys.stdlib_module_names


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_only_the_public_api(path: Path) -> None:
    mods = _imports(path)
    assert "simcast" in mods
    bad = [m for m in mods if not _allowed(m)]
    assert bad == [], f"{path.name} imports {bad}: use `import simcast` (its public names, simcast/__init__.py)"


def test_the_scan_catches_a_subpackage_import(tmp_path: Path) -> None:
    src = ["%matplotlib inline\n", "from simcast.serving.steady.model import X\n"]
    nb = {"cells": [{"cell_type": "code", "source": src}]}
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps(nb))
    assert [m for m in _imports(p) if not _allowed(m)] == ["simcast.serving.steady.model"]

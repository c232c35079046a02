"""Engine decisions live in ``simcast/engines/``: no module outside it compares an engine's name.

A caller asks the engine object (``get_engine(name).pp_dynamic_chunking``, ``pol.engine.schedules``) instead
of ``name == "sglang"``; a comparison elsewhere is a decision that escaped its engine's module, and adding an
engine would mean finding it. Caught (AST): ``==`` / ``!=`` against an engine name, ``in`` / ``not in`` a
literal tuple, list or set holding one, and a dict literal keyed by two or more engine names (a lookup table
standing in for an if/else).
"""

from __future__ import annotations

import ast
from pathlib import Path

from simcast.engines import ENGINE_CHOICES

PKG = Path(__file__).resolve().parents[2] / "simcast"
NAMES = frozenset(ENGINE_CHOICES)
NOT_ENGINES = {
    ("simcast/inputs/loaders.py", 'quantization in (None, "none")'),
    ("simcast/cli/calibrate_db.py", 'value == "none"'),
}
"""(file, comparison) pairs where the word is not an engine (``--quantization none``; ``calibrate --from-db
--engine none``: refit no engine, only NCCL's link collectives)."""


def _engine_names(node: ast.AST) -> list[str]:
    """Engine names among the string constants of ``node`` (a literal or a literal tuple/list/set)."""
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e.value for e in elts if isinstance(e, ast.Constant) and e.value in NAMES]


def _hits(tree: ast.AST, src: str, rel: str = "") -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides, sides[1:]):
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    found = [n for s in (left, right) if isinstance(s, ast.Constant) for n in _engine_names(s)]
                elif isinstance(op, (ast.In, ast.NotIn)):
                    found = _engine_names(right) if not isinstance(right, ast.Constant) else []
                else:
                    found = []
                if found and (rel, ast.get_source_segment(src, node)) not in NOT_ENGINES:
                    out.append((node.lineno, f"compares with {', '.join(found)}"))
        elif isinstance(node, ast.Dict):
            keys = [n for k in node.keys if k is not None for n in _engine_names(k)]
            if len(keys) >= 2:
                out.append((node.lineno, f"dict keyed by {', '.join(keys)}"))
    return out


def engine_name_comparisons(root: Path) -> list[str]:
    """``path:line: what`` for every engine-name comparison in the package at ``root``, outside ``engines/``."""
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if rel.parts[0] == "engines":
            continue
        src, name = f.read_text(), f"simcast/{rel.as_posix()}"
        for line, what in _hits(ast.parse(src, str(f)), src, name):
            out.append(f"{name}:{line}: {what}")
    return out


def test_the_checker_catches_each_form():
    src = (
        'a = x == "vllm"\nb = "sglang" != y\nc = e in ("vllm", "none")\nd = e not in {"trtllm"}\n'
        'T = {"vllm": 1, "sglang": 2}\nok = e in ENGINES or e == "nccl" or {"vllm": 1}\n'
    )
    assert [line for line, _ in _hits(ast.parse(src), src)] == [1, 2, 3, 4, 5]


def test_no_engine_name_comparison_outside_engines():
    found = engine_name_comparisons(PKG)
    assert found == [], "ask the engine object (simcast.engines.get_engine) instead:\n" + "\n".join(found)

"""The op table (simcast.cost.ops.formulas) is explicit and complete: every op a trace can hold has a formula."""

from __future__ import annotations

import re
from pathlib import Path

from simcast.cost.ops.formulas import OP_FORMULAS
from simcast.trace.ir import KNOWN_OPS

PKG = Path(__file__).resolve().parents[2] / "simcast"


def _leaf_ops_declared() -> set[str]:
    """``simcast::<name>`` of every ``torch.library.custom_op`` in simcast/trace (read from the source: no torch)."""
    names: set[str] = set()
    for f in (PKG / "trace").glob("*.py"):
        names |= {f"simcast::{m}" for m in re.findall(r'custom_op\(f"\{_LIB\}::(\w+)"', f.read_text())}
    return names


def test_table_covers_every_known_op() -> None:
    assert set(OP_FORMULAS) == set(KNOWN_OPS)


def test_every_leaf_op_the_tracer_registers_is_known() -> None:
    declared = _leaf_ops_declared()
    assert len(declared) >= 15  # the regex still finds the ops (a renamed helper would make this vacuous)
    assert declared <= KNOWN_OPS, sorted(declared - KNOWN_OPS)


def test_no_registration_by_side_effect() -> None:
    """Only formulas.py fills the table: no decorator or item assignment elsewhere."""
    for f in PKG.rglob("*.py"):
        if f.name == "formulas.py":
            continue
        text = f.read_text()
        assert not re.search(r"OP_FORMULAS\[[^\]]+\]\s*=|OP_FORMULAS\.(update|setdefault)\(", text), f
        assert "@formula(" not in text, f


def test_formulas_are_callables_of_their_concept_module() -> None:
    for op, fn in OP_FORMULAS.items():
        assert callable(fn), op
        assert fn.__module__.startswith("simcast.cost."), (op, fn.__module__)

"""Each one-call's keywords are declared once, as the fields of its options dataclass: the call's
signature is the fields (names, defaults, keyword-only), each field has a one-line doc that ``help()``
shows, a misspelt keyword fails (at run time and under mypy), and the demo search is one constant that
``make demo``, the shipped traces' manifest and the benchmarks share."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import simcast
from simcast.api.search_inputs import DEMO_MODEL, DEMO_REPORT, DEMO_SEARCH, SearchOptions, demo_flags

ROOT = Path(__file__).resolve().parents[2]
CALLS = [
    (simcast.simulate_step, simcast.StepOptions),
    (simcast.optimize, simcast.SearchOptions),
    (simcast.bench_serve, simcast.BenchOptions),
]


@pytest.mark.parametrize("call, options", CALLS, ids=lambda x: getattr(x, "__name__", ""))
def test_the_signature_is_the_options_fields(call, options) -> None:
    fields = {f.name: f for f in dataclasses.fields(options)}
    params = inspect.signature(call).parameters
    assert set(params) == set(fields)
    for name, p in params.items():
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, name
        f = fields[name]
        want = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default == want, name
    assert {"model", "device"} <= {n for n, p in params.items() if p.default is inspect.Parameter.empty}


@pytest.mark.parametrize("call, options", CALLS, ids=lambda x: getattr(x, "__name__", ""))
def test_every_keyword_has_a_one_line_doc_in_help(call, options) -> None:
    doc = call.__doc__ or ""
    for f in dataclasses.fields(options):
        text = f.metadata.get("doc", "")
        assert text and "\n" not in text, f"{options.__name__}.{f.name} has no one-line doc"
        assert f"    {f.name} (" in doc and text in doc, f.name
    returns = {"simulate_step": "StepReport", "optimize": "SearchResult", "bench_serve": "BenchResult"}
    assert inspect.signature(call).return_annotation is getattr(simcast, returns[call.__name__])


@pytest.mark.parametrize("call", [c for c, _ in CALLS], ids=lambda c: c.__name__)
def test_a_misspelt_keyword_is_refused(call) -> None:
    with pytest.raises(TypeError, match="tpp"):
        call(model="Qwen/Qwen3-0.6B", device="h100_sxm", tpp=2)


def test_options_are_frozen_and_keyword_only() -> None:
    o = simcast.StepOptions(model="Qwen/Qwen3-0.6B", device="h100_sxm", tp=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.tp = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        simcast.StepOptions("Qwen/Qwen3-0.6B", "h100_sxm")  # type: ignore[misc]


SNIPPET = """\
import simcast

simcast.simulate_step(model="Qwen/Qwen3-0.6B", device="h100_sxm", tp=2)
simcast.simulate_step(model="Qwen/Qwen3-0.6B", device="h100_sxm", tpp=2)
simcast.simulate_step(model="Qwen/Qwen3-0.6B", device="h100_sxm", tp="2")
simcast.optimize(model="x", device="y", num_devices=8, tp_sizes=[1, 2], ttft_limit=3)
simcast.bench_serve(model="x", device="y", request_rate=1.0, random_input_len=3)
simcast.simulate_step(device="h100_sxm")
"""


@pytest.mark.slow  # about 5 s with mypy's cache of `mypy simcast` (make test), 45 s without
def test_mypy_checks_the_keywords(tmp_path: Path) -> None:
    if shutil.which("mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mypy is not installed beside this interpreter")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", str(snippet)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    ).stdout
    lines = {int(m.group(1)): m.group(2) for m in re.finditer(r"snippet\.py:(\d+): error: (.*)", out)}
    assert set(lines) == {4, 5, 6, 7, 8}, out
    assert '"tpp"' in lines[4] and '"tp"' in lines[5] and '"ttft_limit"' in lines[6]
    assert '"random_input_len"' in lines[7] and '"model"' in lines[8]


def test_the_demo_search_is_one_constant() -> None:
    """``make demo`` runs :data:`DEMO_SEARCH` (the Makefile cannot import it), and the flags name the
    same options as the keywords."""
    make = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    recipe = re.search(r"^demo:.*\n\t(.*)$", make, re.M)
    assert recipe is not None
    assert recipe.group(1).split() == ["$(BIN)/simcast", "optimize", *demo_flags(), DEMO_MODEL, "--report", DEMO_REPORT]
    o = SearchOptions(model=DEMO_MODEL, **DEMO_SEARCH)
    assert (o.num_devices, o.tp_sizes, o.pp_sizes) == (8, (1, 2, 4, 8), (1, 2, 4, 8))


def _commands(text: str) -> list[list[str]]:
    """The ``simcast optimize`` commands a page quotes (``$ simcast ...`` lines or inline code), as
    tokens, continuation lines joined."""
    text = text.replace("\\\n", " ").replace("\n", " ")
    return [m.split() for m in re.findall(r"simcast optimize ([^`$]*?)(?:`|\$|```|simcast optimize:)", text)]


@pytest.mark.parametrize("page", ["README.md", "docs/usage.md", "docs/speed.md"])
def test_the_pages_quote_the_demo_search(page: str) -> None:
    """The demo's command as the pages print it (``make readme`` re-runs them) is the constant's
    (``--top``, which only trims the table, aside)."""
    want = [*demo_flags(), DEMO_MODEL]
    found = []
    for cmd in _commands((ROOT / page).read_text()):
        if "--top" in cmd:
            i = cmd.index("--top")
            cmd = cmd[:i] + cmd[i + 2 :]
        found.append(cmd)
    assert want in found, f"{page}: no `simcast optimize {' '.join(want)}` among {found}"


def test_the_shipped_traces_were_built_by_the_demo_search() -> None:
    manifest = json.loads((ROOT / "simcast" / "data" / "traces" / "manifest.json").read_text())
    head = " ".join(["simcast", "optimize", *demo_flags(), "--workers", "1"])
    assert manifest["searches"] and all(s.startswith(head + " ") for s in manifest["searches"])
    assert f"{head} {DEMO_MODEL}" in manifest["searches"]

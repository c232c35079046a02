"""The shipped notebooks run top to bottom (offline), are stored without outputs, and their prose quotes
the numbers they compute.

A number a markdown cell quotes carries a marker right after it, ``763.3<!-- q:best8 -->`` (invisible
when rendered); a code cell whose source starts with ``# Numbers quoted`` prints ``best8 = 763.3`` for
each, formatted as the prose writes it. After executing a notebook the test compares the two.
"""

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.notebook  # executes notebooks/*.ipynb (minutes): make test-fast skips it

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

MINE = [
    "01_quickstart.ipynb",
    "02_tp_vs_pp.ipynb",
    "03_partition_and_bubble.ipynb",
    "04_serving.ipynb",
    "05_moe.ipynb",
    "06_serving_modes.ipynb",
    "07_deepseek_r1_at_scale.ipynb",
]
KERNEL = "python3"  # the venv's ipykernel (.venv/share/jupyter/kernels/python3); it inherits SIMCAST_CACHE_DIR


QUOTE = re.compile(r"([-+]?\d[\d,]*(?:\.\d+)?)<!-- q:(\w+) -->")
COMPUTED = re.compile(r"^(\w+) = (\S+)$", re.M)


def quoted_in_prose(nb) -> list[tuple[str, str]]:
    """(name, value as the markdown writes it) for every marked number of the notebook's markdown cells."""
    return [(n, v) for c in nb.cells if c.cell_type == "markdown" for v, n in QUOTE.findall(c.source)]


def computed_quotes(nb) -> dict[str, str]:
    """name -> value printed by the executed ``# Numbers quoted`` cells."""
    out: dict[str, str] = {}
    for c in nb.cells:
        if c.cell_type == "code" and c.source.startswith("# Numbers quoted"):
            for o in c.outputs:
                out.update(COMPUTED.findall(o.get("text", "")))
    return out


def quote_mismatches(nb) -> list[str]:
    computed = computed_quotes(nb)
    return [
        f"{n}: prose says {v}, the notebook computes {computed.get(n, 'nothing')}"
        for n, v in quoted_in_prose(nb)
        if computed.get(n) != v
    ]


def test_quote_check_can_fail():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("best 763.3<!-- q:best --> and 12<!-- q:other --> token/s"),
        nbformat.v4.new_code_cell("# Numbers quoted below\nprint('best = 763.3')"),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="best = 763.3\nother = 13\n")]
    assert quote_mismatches(nb) == ["other: prose says 12, the notebook computes 13"]


@pytest.mark.parametrize("name", MINE)
def test_stored_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear outputs before committing"


@pytest.mark.parametrize("name", MINE)
def test_notebook_executes(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name=KERNEL, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()  # raises CellExecutionError with the failing cell's traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert not quote_mismatches(nb), f"{name}: the reading quotes numbers the notebook no longer computes"
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type in ("display_data", "execute_result") and "image/png" in o.get("data", {})
    ]
    assert images, "the notebook should show its figures"

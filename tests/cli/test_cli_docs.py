"""docs/cli.md is generated from the parser (scripts/gen_cli_docs.py): the committed file must be current."""

from pathlib import Path

from simcast.cli.docs import cli_markdown
from simcast.cli.main import make_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_md_is_current():
    assert DOC.read_text(encoding="utf-8") == cli_markdown(make_parser()), (
        "docs/cli.md is stale: run `python scripts/gen_cli_docs.py` (make docs)"
    )


def test_cli_md_lists_exit_codes_and_every_command():
    text = DOC.read_text(encoding="utf-8")
    for code in ("| 0 |", "| 2 |", "| 3 |", "| 130 |"):
        assert code in text
    for name in ("simulate", "optimize", "bench-serve", "models", "devices", "kernel gemm"):
        assert f"`simcast {name}`" in text

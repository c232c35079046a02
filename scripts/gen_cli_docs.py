"""Write docs/cli.md from simcast's argparse parser (every subcommand and flag with its help).

Run: .venv/bin/python scripts/gen_cli_docs.py   (or `make docs`); tests/cli/test_cli_docs.py fails when
the committed file differs from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from simcast.cli.docs import cli_markdown
from simcast.cli.main import make_parser

OUT = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def main() -> None:
    OUT.write_text(cli_markdown(make_parser()), encoding="utf-8")
    print(f"wrote {OUT.relative_to(OUT.parents[1])}")


if __name__ == "__main__":
    main()

"""Re-run every ```text block of README.md that starts with `$ simcast ...` and paste its real output.

Run: .venv/bin/python scripts/update_readme_examples.py   (or `make readme`)
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```text\n(\$ simcast (?:[^\n]*\\\n)*[^\n]*\n)(.*?)```", re.S)


def run(command_lines: str) -> str:
    cmd = command_lines.removeprefix("$ ").replace("\\\n", " ")
    exe = str(Path(sys.executable).with_name("simcast"))
    out = subprocess.run([exe] + shlex.split(cmd)[1:], capture_output=True, text=True, check=True, cwd=README.parent)
    return out.stdout


def main() -> None:
    text = README.read_text()
    new = BLOCK.sub(lambda m: f"```text\n{m.group(1)}{run(m.group(1))}```", text)
    README.write_text(new)
    print(f"updated {len(BLOCK.findall(text))} example block(s) in {README.name}")


if __name__ == "__main__":
    main()

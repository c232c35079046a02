"""Re-run every ```text block that starts with `$ simcast ...` and paste its real output.

The blocks live in README.md (the demo) and docs/usage.md (the worked examples); every file in
``PAGES`` is rewritten in place. Run: .venv/bin/python scripts/update_readme_examples.py   (or `make readme`)
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", ROOT / "docs" / "usage.md")
BLOCK = re.compile(r"```text\n(\$ simcast (?:[^\n]*\\\n)*[^\n]*\n)(.*?)```", re.S)


def run(command_lines: str) -> str:
    cmd = command_lines.removeprefix("$ ").replace("\\\n", " ")
    exe = str(Path(sys.executable).with_name("simcast"))
    out = subprocess.run([exe] + shlex.split(cmd)[1:], capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout


def main() -> None:
    for page in PAGES:
        text = page.read_text()
        new = BLOCK.sub(lambda m: f"```text\n{m.group(1)}{run(m.group(1))}```", text)
        page.write_text(new)
        print(f"updated {len(BLOCK.findall(text))} example block(s) in {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""simcast's own version (the source tree's; an installed package's metadata says the same).

It lives in ``core`` so every layer can read it without importing the package root, which sits above all of
them (it re-exports the one-call API): ``simcast.__version__`` is this value.
"""

from __future__ import annotations

VERSION = "0.1.0"
"""The release this source tree is (pyproject.toml ``version``; ``tests/project/test_wheel.py`` checks they agree)."""

"""The one-call Python API: ``simulate_step``, ``optimize``, ``bench_serve`` (a layer above ``render``,
below ``cli``: the CLI's commands call these functions, so a command and its call give the same numbers).

Import them from ``simcast`` itself (lazily loaded there); see ``simcast/__init__.py`` for every public name.
"""

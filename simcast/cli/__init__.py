"""The command line: one module per command group; the only place that prints and writes files.

Where to add: a command in ``<group>.py`` (``add_<name>_args`` and ``cmd_<name>``, registered in
``main.COMMANDS``); a bounded flag type in ``args.py``; an output path or write in ``outputs.py``; an exit
code in ``exits.py``. A new flag goes in ``tests/cli/test_cli_surface.py`` and ``docs/cli.md``
(``scripts/gen_cli_docs.py``).
"""

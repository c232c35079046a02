"""Text, JSON rows, Chrome traces and plots of results; no simulation, no file writes (``cli/outputs.py``).

Where to add: a table or JSON row of a command in the ``*_tables.py`` module of its result
(``tables.py`` simulate, ``search_tables.py`` optimize, ``finite_tables.py`` finite runs,
``bench_tables.py`` bench-serve, ...); an engine launch line in ``launch.py`` / ``launch_rules.py``;
a plot in ``plots.py`` / ``bench_plots.py`` / ``pareto_plot.py``; the words of an assumption record
in ``assumption_text.py`` (one formatter per topic, in ``FORMATTERS``); number, JSON and markdown
formatting every printer shares in ``text.py``.
"""

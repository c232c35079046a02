"""Self-contained HTML reports of simcast runs (``--report PATH.html``, ``simcast.api.report_html``)."""

"""One forward step of one layout: ``simulate(spec) -> Report`` (stage costs, pipeline timeline, memory).

Where to add: what a stage costs or how a step is assembled in ``simulate.py``; the pipeline schedule
and event timeline in ``timeline.py``; a report field in ``report.py``; a labelled assumption or
fallback in ``assumptions.py`` (a record: its topic and facts in ``simcast/core/assumption.py``, its
words in ``simcast/render/assumption_text.py``); layer partitions in ``partition.py``; chunked prefill
in ``chunked.py``; many batches at once in ``batched.py``.
"""

"""Serving: the mixed step, steady state, the request-level simulator, search.

Where to add: an engine or an engine behaviour in its module under ``simcast/engines/`` (its ``EngineRecord``
and every decision; docs/engines.md has the checklist); KV-cache
capacity in ``kv_memory.py``; the scheduler of the request-level simulator in ``scheduler.py`` /
``requests.py``; a search axis in ``search.py`` (disaggregated: ``disagg_search.py``); a key of the
service YAML in ``service_yaml.py``.
"""

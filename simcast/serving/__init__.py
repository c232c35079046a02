"""Serving: what a deployment of an engine does with requests. One subpackage per way of answering:

- ``steady/``: the steady-state estimate of an aggregated deployment at a concurrency (``model.py``
  ``estimate_serving``; the shape of its steps in ``shape.py``);
- ``request_level/``: the request-level simulator of ``bench-serve`` (``simulate.py`` in named phases:
  arrivals, admission, step formation, step cost, completion; the engine scheduler ``scheduler.py``; the
  requests ``request_gen.py``; the run's window, result and typed metrics);
- ``disagg/``: disaggregated deployments (prefill and decode pools, the KV transfer; steady state, request
  level, search and service YAML);
- ``speculative/``: speculative decoding: the user's spec (``spec.py``), the scheme a run asks
  (``scheme.py``: ``NO_SPECULATION`` when off, never None) and the draft (``draft.py``);
- ``search/``: the optimizer's layout and batch search (``layouts.py``), its refinement by the
  request-level simulator, the chunk setting as a searched axis, and the task runner (``parallel.py``).

Shared by them, at this level: the deployment's serving config (``config.py``), one engine step through the
stage pipeline (``step.py``), KV memory and admission (``kv_memory.py``), the service YAML
(``service_yaml.py``) and reading an engine profile (``engine_profile.py``).

Where to add: an engine or an engine behaviour in its module under ``simcast/engines/`` (docs/engines.md has
the checklist); a search axis in ``search/layouts.py`` (disaggregated: ``disagg/search.py``); a key of the
service YAML in ``service_yaml.py``. Fitting an engine's CPU times to measured runs is ``calib/serving_fit/``.
"""

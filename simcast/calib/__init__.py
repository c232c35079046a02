"""Fitting device and engine profiles from measured data, and measuring the fits' accuracy.

One subpackage per role. Readers import no other role; fitting, validation and profile writing
import one another module by module without cycles (``fitting/fit.py`` predicts rows with
``validation/validate.py``, ``profiles/profile_yaml.py`` reads ``fitting/fit.py``'s parameter names);
``tests/project/test_architecture.py`` checks both.


- ``readers/``: measured-data readers (``aic_db.py`` the measured-kernel database, ``vidur.py``,
  ``measured_schema.py`` the generic CSV schema, ``db_split.py`` the held-out split);
- ``fitting/``: ``fit.py`` efficiency and links, ``fit_kernels.py`` engine kernels, ``fit_collectives.py``
  collective regimes, ``from_db.py`` /
  ``from_db_moe.py`` the database's tables, ``nccl_transfer.py``, ``template.py`` a new device's profile;
- ``validation/``: ``validate.py``, ``db_accuracy.py``, ``db_accuracy_moe.py``, ``public_nccl.py`` (NCCL all-reduce
  against public timings transcribed into ``benchmarks/data/nccl_tests_public.csv``);
- ``profiles/``: profile writing on a round-trip YAML document (``profile_doc.py`` load, dump and
  ``set_value`` with a value's provenance note, ``profile_notes.py`` counts read from the notes,
  ``profile_yaml.py``, ``engines_yaml.py``); the only code that imports ruamel.yaml;
- ``ondevice/``: microbenchmarks (``bench_plan.py``, ``microbench.py``);
- ``serving_fit/``: an engine's CPU time per step and per request fitted to measured serving runs
  (``calibrate-serving``: ``overhead_fit.py``, the model it fits ``run_model.py``, a recorded replay
  ``recorded.py``, the profile it writes ``profile_out.py``). It runs the serving simulator, so ``calib``
  sits above ``serving``.

Where to add: a new measured-data source is a reader in ``readers/`` returning rows of the generic
schema; a new kernel family is its fit in ``fitting/fit_kernels.py`` (decode attention: ``fitting/fit_decode.py``)
(or a ``fitting/from_db_<family>.py``),
its YAML section in ``profiles/engines_yaml.py`` and its accuracy table in ``validation/`` beside the others.
"""

"""Fitting device and engine profiles from measured data, and measuring the fits' accuracy.

Roles: readers of measured data (``aic_db.py`` the measured-kernel database, ``vidur.py``,
``measured_schema.py`` the generic CSV schema, ``from_db.py``/``from_db_moe.py`` rows and splits,
``db_split.py``); fitting (``fit.py`` efficiency and links, ``fit_kernels.py`` engine kernels,
``nccl_transfer.py``); validation (``validate.py``, ``db_accuracy.py``, ``db_accuracy_moe.py``);
profile writing (``profile_yaml.py``, ``engines_yaml.py``, ``template.py``); on-device measurement
(``microbench.py``, ``bench_plan.py``). A new kernel family: its fit in ``fit_kernels.py`` (or a
``from_db_<family>.py``), its YAML section in ``engines_yaml.py``, its accuracy table beside the others.
"""

"""The only place that reads user files: checked loaders and schemas.

Where to add: a file format in ``files.py``; a bound on a size in ``limits.py`` (with its reason and a row
in ``limits.TABLE``); a config.json key in ``loaders.py`` (dense architectures), ``moe_config.py``
(MoE architectures) or ``quant_config.py`` (``quantization_config``); a profile key in
``profile_schema.py``; a workload distribution in ``workloads.py``.
"""

"""Cost of traced ops: FLOPs and bytes per op, roofline or engine-fitted kernel time, collectives.

Where to add:

- an op's formula: the module of its concept (``dense_ops.py``, ``attention_ops.py``, ``moe.py``,
  ``mla.py``, ``quant_linear.py``) and one row in the explicit table ``formulas.py``;
  array form for many batches at once: ``batched.py`` (``ARRAY_FORMULA_OPS``);
- a roofline or efficiency term: ``compute.py``; a curve shape shared by kernel fits: ``curves.py``;
- an engine-fitted kernel family: ``gemm.py``, ``attention.py``, ``moe_kernels.py``, dispatched by
  ``engine_cost.py`` (one batch) and ``batched_kernels.py`` (many), which both call ``gemm.gemm_envelope`` and
  ``attention_launch.attention_launch``;
- a collective or p2p time: ``comm.py`` (analytic, hierarchical) and ``collectives.py`` (fitted
  ``α + factor · bytes / β`` regimes).
"""

"""Cost of traced ops: FLOPs and bytes per op, roofline or engine-fitted kernel time, communication.

- ``ops/``: each op's formula (the module of its concept: ``dense_ops.py``, ``attention_ops.py``, ``moe.py``,
  ``mla.py``, ``quant_linear.py``; one row each in the explicit table ``formulas.py``), the roofline and
  efficiency terms (``compute.py``), and their array form for many batches at once (``batched.py``,
  ``ARRAY_FORMULA_OPS``; batches as arrays: ``batches.py``);
- ``kernels/``: the engines' fitted kernels: GEMM (``gemm.py``, ``gemm_envelope`` the one GEMM time),
  attention (``attention_launch.py`` the one launch time, the kernel rules each in its module:
  ``flash_decode.py``, ``flashinfer_decode.py``, ``trtllm_decode.py``, ``xqa_launch.py``, ``prefill_rules.py``,
  ``diff_kv.py``), MoE (``moe_kernels.py``); which engine's fit costs an op (``engine_cost.py``: one batch;
  ``batched_kernels.py``: many, through the same functions); one kernel predicted alone (``one_kernel.py``);
- ``comm/``: collective and p2p time (``time.py``: analytic, hierarchical) and the fitted
  ``α + factor · bytes / β`` regimes (``collectives.py``).

Where to add: an op's formula in ``ops/`` with its row in ``ops/formulas.py``; a kernel rule as a module in
``kernels/`` called by ``attention_launch.py`` (so the scalar and batched paths share it); a collective in
``comm/``.
"""

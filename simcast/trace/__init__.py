"""Stage-local modules on the meta device, traced by torch.compile into op records (cached on disk).

Where to add: a leaf op in the module of its concept (``ops.py`` dense layer and attention, ``moe.py``,
``mla.py``, ``quant.py``: a ``torch.library.custom_op`` with a fake kernel), its name in
``ir.KNOWN_OPS`` and its formula row in ``simcast/cost/ops/formulas.py``; a layer's structure in
``stage.py``; a field the trace depends on in ``key.py`` (``StageKey``).
"""

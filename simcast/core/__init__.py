"""Pure specs and arithmetic: frozen keyword-only dataclasses with units in field names, no I/O.

Where to add:

- a model field: ``specs.py`` (``ModelSpec``); an architecture sub-spec in the module of its concept
  (``moe.py`` routed experts, ``mla.py`` latent attention, ``quant.py`` weight formats);
- a dtype or weight format and its bytes per element: the one table in ``dtypes.py``;
- weights or KV bytes of a layer: ``weights.py`` / ``kv.py`` (per-rank shapes from ``shards.py``),
  stage totals in ``memory.py``;
- rank groups, node placement, labels of a layout: ``layout.py`` (MoE groups: ``moe_layout.py``);
- a new assumption a result states: a ``Topic`` and its facts dataclass in ``assumption.py`` (no
  sentence: the words go in ``simcast/render/assumption_text.py``);
- a device profile field: ``specs.py`` (``DeviceSpec``) with its range in
  ``simcast/inputs/profile_schema.py``; an engine kernel fit: ``kernel_fits.py``.
"""

"""Attention whose keys and values have different head sizes ("DiffKV": MiMo-V2-Flash's keys of 192 and
values of 128 elements, ai-dynamo/aiconfigurator ``collector/cases/models/MiMoV2FlashForCausalLM_cases.yaml``
@e23be5a7; DeepSeek MLA's non-absorbed prefill is the same shape).

Assumption (labelled in docs/model.md): every byte and FLOP of an attention call is linear in the head size
of the tensor it touches: keys ``kv_len · kv_heads · head_dim`` and values ``kv_len · kv_heads · v_head_dim``
elements, QK^T over ``head_dim`` and PV over ``v_head_dim``, q read at ``head_dim`` and o written at
``v_head_dim``. Every such term of :mod:`simcast.cost.kernels.attention` is written as ``2 · head_dim`` per K/V,
QK/PV or q/o pair, so a call with distinct sizes is costed exactly by their mean (:func:`mean_head_dim`),
while the kernel-selection rules (XQA support, FlashInfer's tensor-core choice, prefill tiles) see the key
head size. Efficiencies fitted per head size (``half_head_dim``) read the mean too (an approximation). A
launch with distinct sizes adds the fit's ``diff_kv_launch_s`` once (the engine's separate K/V head-size
path; 0 unless fitted).
"""

from __future__ import annotations

import numpy as np

from simcast.core.kernel_fits import DecodeAttentionFit


def mean_head_dim(head_dim, v_head_dim=None):
    """``(head_dim + v_head_dim) / 2`` elements (``head_dim`` when ``v_head_dim`` is None or 0). Array-friendly."""
    if v_head_dim is None:
        return head_dim
    d, dv = np.asarray(head_dim, float), np.asarray(v_head_dim, float)
    return np.where(dv > 0, (d + dv) / 2.0, d)


def diff_kv_s(fit: DecodeAttentionFit, head_dim, v_head_dim=None):
    """Seconds added to a launch whose value head size differs from its key head size (``fit.diff_kv_launch_s``)."""
    if v_head_dim is None or not fit.diff_kv_launch_s:
        return 0.0
    d, dv = np.asarray(head_dim, float), np.asarray(v_head_dim, float)
    return np.where((dv > 0) & (dv != d), fit.diff_kv_launch_s, 0.0)

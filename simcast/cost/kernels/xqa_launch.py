"""TensorRT-LLM's decode launch under its split-form rules (``trtllm_xqa_mb`` / ``trtllm_xqa_sb``): the kernel
family the engine picks, its sub-sequence split and CTA waves, and the padding envelope in the batch.

Shared by the per-call form (:func:`simcast.cost.kernels.attention.decode_parts`) and the batch paths
(:mod:`simcast.cost.kernels.attention_launch`); the rules and constants cite
TensorRT-LLM's code in :mod:`simcast.cost.kernels.trtllm_decode` and :mod:`simcast.cost.kernels.trtllm_decode_sm89`.
"""

from __future__ import annotations

import numpy as np

from simcast.core.kernel_fits import DecodeAttentionFit
from simcast.cost.kernels.attention_io import decode_bytes, l2_factor
from simcast.cost.kernels.curves import smooth_max
from simcast.cost.kernels.trtllm_decode import (
    XQA_MAX_SUB_SEQ,
    XQA_TARGET_WAVE_FACTOR,
    split_launch_s,
    xqa_min_batch,
    xqa_runs,
    xqa_supported,
)
from simcast.cost.kernels.trtllm_decode_sm89 import SPLIT_FORM_RULES, launch_blocks, xqa_launch_blocks


def xqa_launch_terms(
    fit: DecodeAttentionFit,
    hbm_bw_bytes_per_s: float,
    batch,
    kv_max,
    mean_tokens,
    heads,
    kv_heads,
    head_dim,
    nbytes,
    terms,
):
    """(compute_s, memory_s, wave_s) of decode launches: ``terms`` under rules other than
    ``"trtllm_xqa_mb"``; under it (array-friendly) the family the engine picks (:func:`xqa_runs`) split as
    it splits it (:func:`xqa_blocks` / :func:`mmha_blocks`, from the launch's requests and longest
    context), its CTA waves (:func:`split_launch_s`, ``mean_tokens(blocks)`` the mean tokens per CTA over
    the requests), no separate compute term (the per-token times hold the math) and memory at ``memory``
    of the bandwidth (the waves carry the small-launch inefficiency; :func:`l2_factor` where fitted), with
    the padding envelope in the batch (below). Shared by the per-call form and the batch paths
    (:mod:`simcast.cost.kernels.attention_launch`)."""
    if fit.kernel_rule not in SPLIT_FORM_RULES:
        return terms
    bt, kvm, h, hkv, d = (np.asarray(v, float) for v in (batch, kv_max, heads, kv_heads, head_dim))
    x = xqa_runs(fit, bt, kvm, h, hkv, d)
    m = launch_blocks(fit, x, bt, kvm, h, hkv)
    t_w = split_launch_s(fit, x, bt, m, mean_tokens(m), h, hkv, d)
    nb = np.asarray(nbytes, float)
    bw = hbm_bw_bytes_per_s * fit.memory
    t_m = nb / (bw * l2_factor(fit, nb))
    t_m, t_w = _fewer_blocks_envelope(fit, bw, x, bt, kvm, m, mean_tokens, h, hkv, d, nb, t_m, t_w)
    # the padding envelope in the batch: a launch the rule leaves to masked MHA although XQA takes its shape
    # could run as XQA padded to the fewest requests XQA is chosen for (padding requests: one key each);
    # it takes the smaller of the two, so adding a request never makes the launch faster
    pad = xqa_supported(h, hkv, d) & ~x
    if np.any(pad):
        bx = np.maximum(bt, xqa_min_batch(fit, kvm, hkv))
        mx = xqa_launch_blocks(fit, bx, kvm, hkv)
        tok = (mean_tokens(mx) * bt + (bx - bt)) / bx
        t_wx = split_launch_s(fit, True, bx, mx, tok, h, hkv, d)
        qo = 4.0 * h * d  # q read and o written per request, 2 bytes each
        reads = np.maximum(1.0, h / hkv / fit.group_share)  # masked MHA's KV reads, in ``nbytes``
        nbx = (nb - bt * qo) / reads + bt * qo + (bx - bt) * decode_bytes(1, 1, h, hkv, d, fit.dtype)
        t_mx = nbx / (bw * l2_factor(fit, nbx))
        use = pad & (smooth_max(t_mx, t_wx, p=fit.smooth_p) < smooth_max(t_m, t_w, p=fit.smooth_p))
        t_m, t_w = np.where(use, t_mx, t_m), np.where(use, t_wx, t_w)
    return np.zeros_like(t_m), t_m, t_w


def _first_batch_with_blocks(fit: DecodeAttentionFit, xqa, blocks, heads, kv_heads):
    """The fewest requests for which the family's split (:func:`simcast.cost.kernels.trtllm_decode.xqa_blocks` /
    :func:`simcast.cost.kernels.trtllm_decode.mmha_blocks`) gives at most ``blocks`` sub-sequences per request
    (array-friendly): XQA divides its count by the CTA excess over ``8`` waves, so ``floor(8 · SMs /
    (kv_heads · (blocks + 1))) + 1`` requests (or the 6000-sub-sequence workspace, ``floor(6000 / (blocks +
    1)) + 1``); masked MHA splits ``ceil(SMs · CTAs per SM / (batch · heads))`` ways, so ``ceil(SMs · CTAs
    per SM / (heads · blocks))``."""
    mb = np.asarray(blocks, float)
    x_b = np.minimum(
        np.floor(fit.sm_count * XQA_TARGET_WAVE_FACTOR / (kv_heads * (mb + 1.0))),
        np.floor(XQA_MAX_SUB_SEQ / (mb + 1.0)),
    )
    f_b = np.ceil(fit.sm_count * max(fit.mmha_ctas_per_sm, 1) / (heads * mb)) - 1.0
    return np.where(xqa, x_b, f_b) + 1.0


def _fewer_blocks_envelope(fit, bw, x, bt, kvm, m, mean_tokens, h, hkv, d, nb, t_m, t_w):
    """The envelope over the multi-block count: both families cut each request into fewer sub-sequences as
    the batch grows, so the engine's launch can be faster on a few more requests (fewer CTA waves). A launch
    takes the least of its own time and the engine's time on more requests like its own (the fewest requests
    of each smaller count its family reaches; the family kept: the XQA-or-MMHA switch has its own envelope),
    so adding a request never makes it faster; where the engine's times already rise with the batch, they
    are unchanged."""
    most = int(np.max(m)) if np.size(m) else 1
    if most <= 1 or fit.kernel_rule != "trtllm_xqa_mb":
        return t_m, t_w
    best = smooth_max(t_m, t_w, p=fit.smooth_p)
    for fewer in range(1, min(most, 128)):
        bx = np.maximum(bt, _first_batch_with_blocks(fit, x, fewer, h, hkv))
        same = xqa_runs(fit, bx, kvm, h, hkv, d) == x
        mx = launch_blocks(fit, x, bx, kvm, h, hkv)
        ok = same & (mx < m) & (bx > bt) & (bt > 0)  # an empty launch (no requests) has nothing to pad
        if not np.any(ok):
            continue
        t_wx = split_launch_s(fit, x, bx, mx, mean_tokens(mx), h, hkv, d)
        nbx = nb * bx / np.maximum(bt, 1.0)
        t_mx = nbx / (bw * l2_factor(fit, nbx))
        tx = smooth_max(t_mx, t_wx, p=fit.smooth_p)
        use = ok & (tx < best)
        t_m, t_w, best = np.where(use, t_mx, t_m), np.where(use, t_wx, t_w), np.where(use, tx, best)
    return t_m, t_w

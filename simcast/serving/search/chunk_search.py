"""The prompt-chunk setting as a searched dimension of a layout, and a prompt's next chunk under it.

A chunk setting is ``(chunk_tokens, dynamic)``: the engine's chunk of a long prompt (vLLM
``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``: also the step's token budget) and, for
SGLang at PP > 1, ``--enable-dynamic-chunking`` (:mod:`simcast.core.chunking`). ``optimize
--chunked-prefill-sizes`` evaluates every setting per layout and keeps one by :data:`RULE`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache

from simcast.core.chunking import SGLANG_MAX_PREFILL_TOKENS, QuadraticLatency, sglang_fit, sglang_next_chunk
from simcast.serving.config import ServingConfig
from simcast.serving.steady.model import prefill_spec

AUTO_CHUNK_SIZES = (2048, 4096, 8192, 16384)
"""``--chunked-prefill-sizes`` with no value: the chunk sizes SGLang itself picks by GPU memory
(python/sglang/srt/server_args.py ``_handle_gpu_memory_settings``, see
:func:`simcast.engines.sglang.sglang_limits`), plus the engine's own default for the layout."""

TTFT_TIE = 0.01
"""Relative 1-prompt TTFT difference under which two settings count as equal (then throughput decides):
a numerical tolerance, so a prompt shorter than every chunk (identical TTFTs) is decided by throughput."""

RULE = (
    "chunk setting per layout: the lowest 1-prompt (idle) TTFT among the settings whose best point meets the "
    f"limits; settings within {TTFT_TIE:.0%} of it are ranked by token/s/device"
)


def chunk_settings(cfg: ServingConfig, sizes: Sequence[int]) -> list[tuple[int, bool]]:
    """``(chunk_tokens, dynamic)`` settings to try on ``cfg``'s layout: each size and the engine's own
    default, static; with SGLang at PP > 1 each also with dynamic chunking."""
    own = cfg.policy.max_num_batched_tokens
    out = [(s, False) for s in sorted({*sizes, own})]
    if cfg.policy.engine.pp_dynamic_chunking and cfg.parallel.pp > 1:
        out += [(s, True) for s, _ in list(out)]
    return out


def with_setting(cfg: ServingConfig, chunk_tokens: int, dynamic: bool) -> ServingConfig:
    return replace(cfg, workload=replace(cfg.workload, max_batched_tokens=chunk_tokens), dynamic_chunking=dynamic)


def chunk_label(cfg: ServingConfig) -> str:
    """``8192`` or ``8192 dyn`` (dynamic chunking from 8192)."""
    return f"{cfg.policy.max_num_batched_tokens}" + (" dyn" if cfg.dynamic_chunks else "")


def pick(results: Sequence[tuple[float, float]]) -> int:
    """Index of the chosen setting by :data:`RULE`; ``results`` are (1-prompt TTFT s, token/s/device)."""
    low = min(t for t, _ in results)
    near = [i for i, (t, _) in enumerate(results) if t <= low * (1 + TTFT_TIE)]
    return max(near, key=lambda i: (results[i][1], -results[i][0]))


def _fit(cfg: ServingConfig, use_disk_cache: bool) -> QuadraticLatency:
    """SGLang's profile of stage 0 on ``cfg``'s layout (fresh prefills up to 1.25x the chunk)."""
    from simcast.sim.chunked import stage_cost_of

    spec = prefill_spec(replace(cfg, dynamic_chunking=False), use_disk_cache=use_disk_cache)
    return sglang_fit(cfg.policy.max_num_batched_tokens, stage_cost_of(spec, 0, use_disk_cache=use_disk_cache))


def next_chunk_fn(cfg: ServingConfig, *, use_disk_cache: bool = True) -> Callable[[int], int] | None:
    """``next_chunk(prefix_tokens) -> tokens``: the size of a prompt's next chunk once ``prefix_tokens`` of it
    are scheduled, under SGLang's dynamic chunking (the first chunk is ``--chunked-prefill-size``; later ones
    from the quadratic fit of stage 0's prefill time); None when chunks are static (the token budget)."""
    if not cfg.dynamic_chunks:
        return None
    size = cfg.policy.max_num_batched_tokens
    fit = _fit(cfg, use_disk_cache)
    smooth = cfg.dynamic_chunking_smooth_factor

    @lru_cache(maxsize=4096)
    def nxt(prefix: int) -> int:
        if prefix <= 0:
            return size
        got = sglang_next_chunk(
            prefix, size, fit, smooth_factor=smooth, page_size=1, max_chunk_tokens=SGLANG_MAX_PREFILL_TOKENS
        )
        return got or size

    return nxt

"""Notes bench-serve's result carries about the engine's prompt chunking."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from simcast.serving.config import ServingConfig


def _chunking_notes(cfg: ServingConfig) -> list[str]:
    """The assumption line SGLang's dynamic chunking adds (none when it is off)."""
    if cfg.dynamic_chunks:
        return [
            f"SGLang dynamic chunking from {cfg.policy.max_num_batched_tokens} (smooth factor "
            f"{cfg.dynamic_chunking_smooth_factor:g}): a prompt's chunks after the first from the quadratic fit "
            "of stage 0's prefill time, one chunk per microbatch"
        ]
    if cfg.dynamic_chunking:
        return ["--enable-dynamic-chunking has no effect at --pp 1 (SGLang sizes chunks dynamically only with PP)"]
    return []

"""NVIDIA Dynamo (github ai-dynamo/dynamo): an orchestrator, not a scheduler of its own, so a **mapping** onto the
engine its workers run rather than an :class:`~simcast.engines.base.Engine`.

Dynamo's SGLang backend "uses SGLang's native argument parser — all SGLang engine arguments (e.g. --model-path,
--tp, --trust-remote-code) are passed through directly" and adds only worker-mode (``--disaggregation-mode
prefill|decode``) and tokenizer arguments (Dynamo docs, Backends > SGLang > Reference Guide,
https://docs.nvidia.com/dynamo/latest/backends/sg-lang/reference-guide); its TensorRT-LLM and vLLM backends
(``python -m dynamo.trtllm``, ``python -m dynamo.vllm``) likewise run the engine's own executor with the
engine's own arguments. A worker's steps, KV admission and kernels are therefore its backend's, and simcast
runs ``--engine dynamo-<backend>`` as ``--engine <backend>``. What Dynamo adds is expressed with simcast's own
flags: prefill and decode workers (``--serving-mode disagg --prefill-workers P --decode-workers D``, each pool's
``--prefill-layout`` / ``--decode-layout``), the KV transfer over NIXL (``--kv-transfer``) and the KV-aware
router (``--router kv_aware``). Dynamo's Rust HTTP front end is costed as the backend's own front end (no Dynamo
measurement; an approximation stated in docs/expressing_deployments.md).
"""

from __future__ import annotations

BACKENDS: dict[str, str] = {
    "dynamo-sglang": "sglang",
    "dynamo-trtllm": "trtllm",
    "dynamo-vllm": "vllm",
}
"""``--engine`` spellings of a Dynamo deployment -> the engine its workers run (``python -m dynamo.<backend>``)."""

BARE = "dynamo"
"""``--engine dynamo`` alone names no worker engine: refused with the spellings that do."""


def backend_engine(name: str) -> str:
    """The engine a Dynamo spelling runs (``dynamo-sglang`` -> ``sglang``; ``dynamo.sglang`` and ``dynamo_sglang``
    as well); any other name is returned unchanged (``ValueError`` for ``dynamo`` alone)."""
    key = name.strip().lower().replace(".", "-").replace("_", "-")
    if key == BARE:
        raise ValueError(f"dynamo orchestrates another engine's workers: give {', '.join(BACKENDS)}")
    return BACKENDS.get(key, name)

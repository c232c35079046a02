"""What every engine's launch lines share (pure text, no I/O): shell quoting, the head node's address, the
node count of a layout, the precision flags and the notes of speculative decoding. Each engine's own
arguments are built in its module (:meth:`simcast.engines.base.Engine.server_lines`)."""

from __future__ import annotations

import shlex

from simcast.core.kv import is_fp4_kv
from simcast.engines.base import LaunchTarget

HEAD = "${HEAD_IP}"
"""Node 0's address in multi-node lines: left unquoted so the shell expands it (set HEAD_IP first)."""
DRAFT_PLACEHOLDER = "DRAFT_MODEL"


def command_line(args: list) -> str:
    """A shell command line of ``args``, each one quoted (``shlex.quote``): a model name from a config file
    (``x; touch PWNED #``) stays one argument when the line is pasted into a shell. Only :data:`HEAD`
    (alone or as ``HEAD:port``) stays unquoted, for the shell to expand."""
    return " ".join(
        str(a)
        if str(a) == HEAD or str(a).startswith(HEAD + ":") and str(a)[len(HEAD) + 1 :].isdigit()
        else shlex.quote(str(a))
        for a in args
    )


def nodes(cfg: LaunchTarget, ranks: int) -> int:
    """Nodes that ``ranks`` GPUs fill on ``cfg``'s device."""
    dpn = cfg.device.links.devices_per_node
    return -(-ranks // dpn)


def precision_flags(cfg: LaunchTarget, fp8_kv_cache: str) -> list[str]:
    """``--quantization fp8`` when simcast applied W8A8 fp8 (a checkpoint quantised by its own
    config needs no flag), ``--quantization modelopt_fp4`` for NVFP4 weights (vLLM's and SGLang's name of
    ModelOpt's NVFP4 method: vllm/model_executor/layers/quantization/__init__.py, sglang
    python/sglang/srt/server_args.py ``QUANTIZATION_CHOICES``), ``--quantization mxfp4`` when simcast applied
    MXFP4 experts, and ``--kv-cache-dtype`` with the engine's spelling of fp8 (``fp8_kv_cache``) or ``nvfp4``."""
    q, out = cfg.model.quant, []
    if q is not None and q.method == "fp8" and q.dense_format == "fp8":
        out += ["--quantization", "fp8"]
    if q is not None and q.method == "nvfp4":
        out += ["--quantization", "modelopt_fp4"]
    if q is not None and q.method == "mxfp4" and q.source.startswith("--quantization"):
        out += ["--quantization", "mxfp4"]
    if cfg.kv_cache_dtype == "fp8":
        out += ["--kv-cache-dtype", fp8_kv_cache]
    if is_fp4_kv(cfg.kv_cache_dtype):  # vLLM's and SGLang's name of the NVFP4 KV cache (simcast.core.kv)
        out += ["--kv-cache-dtype", "nvfp4"]
    return out


def speculative_draft(cfg: LaunchTarget, notes: list[str]) -> str | None:
    """The draft model argument of ``cfg.speculative`` ("" when the method needs none; None: no speculation),
    with the notes every engine's line carries."""
    s = cfg.speculative
    if s is None:
        return None
    needs_head = s.method in ("eagle", "eagle3") and not s.draft_model
    if needs_head:
        notes.append(f"replace {DRAFT_PLACEHOLDER} with the {s.method} draft head's checkpoint")
    draft = s.draft_model or (DRAFT_PLACEHOLDER if needs_head else "")
    notes.append(f"speculative acceptance assumed {','.join(f'{a:g}' for a in s.acceptance)}: check the engine's log")
    return draft


DYNAMO_FRONTEND_SOURCE = "ai-dynamo/dynamo components/frontend/src/dynamo/frontend/main.py@987bbcb5"
LLMD_EPP_SOURCE = "llm-d/llm-d-inference-scheduler deploy/config/epp-prefix-cache-tracking-config.yaml@dd59849a"


def external_router(router: str, notes: list[str]) -> list[tuple[str, str]]:
    """The launch line of a router that runs outside the engine (none for the engines' own policies):
    ``kv_aware`` is Dynamo's frontend in KV mode (``--router-mode kv``, ``--kv-overlap-score-weight`` 1.0 and
    ``--router-temperature`` 0.0, its defaults, :data:`DYNAMO_FRONTEND_SOURCE`); ``prefix_aware`` is llm-d's
    endpoint picker, deployed from a plugin configuration, not one command (:data:`LLMD_EPP_SOURCE`)."""
    if router == "kv_aware":
        notes.append(
            "kv_aware: Dynamo's KV router; its workers run as python -m dynamo.<engine> with the server flags "
            f"above and register with the frontend ({DYNAMO_FRONTEND_SOURCE})"
        )
        flags = ["--router-mode", "kv", "--kv-overlap-score-weight", "1.0", "--router-temperature", "0.0"]
        return [("router", command_line(["python", "-m", "dynamo.frontend", *flags]))]
    if router == "prefix_aware":
        notes.append(
            "prefix_aware: llm-d's endpoint picker (EPP), deployed with prefix-cache-scorer (weight 3, "
            f"cache_tracking), kv-cache-scorer (1), queue-scorer (1) and max-score-picker ({LLMD_EPP_SOURCE}); "
            "no single launch line"
        )
    return []

"""The service YAML's layout in the engines' own spelling (``parallel_config``), read into simcast's.

simcast's keys ``tp_size``/``dp_size`` are attention TP per DP rank and DP ranks (vLLM's meaning). A launch
copied from SGLang or TensorRT-LLM counts the other way (:mod:`simcast.api.layout_spelling`, with sources):

- ``layout_spelling: engine`` reads ``tp_size`` as every GPU of a stage and ``dp_size`` /
  ``enable_dp_attention`` as SGLang's ``--dp-size`` / ``--enable-dp-attention``;
- TensorRT-LLM's LLM-API keys ``tensor_parallel_size``, ``pipeline_parallel_size``,
  ``moe_expert_parallel_size`` and ``enable_attention_dp`` are read as TensorRT-LLM reads them (they imply
  ``layout_spelling: engine``); each with its simcast twin (``tp_size``...) given too is one error unless equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simcast.core.errors import SimcastInputError, require
from simcast.core.layout_spelling import engine_layout

TRTLLM_KEYS = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "moe_expert_parallel_size": "ep_size",
}
"""TensorRT-LLM's LLM-API layout keys (``tensorrt_llm/llmapi/llm_args.py``) -> the key they set."""
SPELLINGS = ("simcast", "engine")
"""``parallel_config.layout_spelling``: simcast's keys (default) or the engines' (SGLang, TensorRT-LLM)."""


def read_engine_layout(v: dict[str, Any], present: set[str], name: Callable[[str], str]) -> str:
    """Put the engine-spelled layout of the merged values ``v`` into simcast's keys (``tp_size``,
    ``pp_size``, ``dp_size``, ``ep_size``, ``enable_dp_attention``); ``present``: the keys the YAML or the
    CLI gave. Returns how it read them ("" when the layout is in simcast's spelling)."""
    spelling = v.get("layout_spelling") or "simcast"
    require(spelling in SPELLINGS, name("layout_spelling"), spelling, f"allowed: {', '.join(SPELLINGS)}")
    trtllm = [k for k in TRTLLM_KEYS if v.get(k) is not None]
    if spelling == "simcast" and not trtllm and not v.get("enable_attention_dp"):
        return ""
    for key in trtllm:
        ours = TRTLLM_KEYS[key]
        require(
            ours not in present or v[ours] == v[key],
            name(key),
            v[key],
            f"is TensorRT-LLM's spelling of {ours} ({v[ours]} given too): give one",
        )
        v[ours] = v[key]
    tp_key = "tensor_parallel_size" if "tensor_parallel_size" in trtllm else "tp_size"
    require(
        tp_key in present,
        name(tp_key),
        None,
        "the engines' spelling needs the TP size (every GPU of a stage: SGLang tp_size, TensorRT-LLM "
        "tensor_parallel_size)",
    )
    try:
        lay = engine_layout(
            tp_size=v["tp_size"],
            dp_size=v["dp_size"] if "dp_size" in present else None,
            enable_dp_attention=bool(v["enable_dp_attention"]),
            enable_attention_dp=bool(v.get("enable_attention_dp")),
            pp=v["pp_size"],
        )
    except SimcastInputError as e:  # the flags' names -> the YAML keys
        key = {"--tp-size": tp_key, "--dp-size": "dp_size"}.get(e.field, e.field)
        raise SimcastInputError(name(key), e.value, e.allowed) from None
    v.update(tp_size=lay.tp, dp_size=lay.dp, enable_dp_attention=lay.dp_attention)
    given, _, rest = lay.reading.partition(" read as")
    how, _, _ = rest.rpartition(" (simcast:")
    keys = given.replace("--tp-size ", f"{tp_key}: ").replace(" --dp-size ", ", dp_size: ")
    keys = keys.replace(" --enable-attention-dp", ", enable_attention_dp: true")
    keys = keys.replace(" --enable-dp-attention", ", enable_dp_attention: true")
    ours = f"tp_size: {lay.tp}, dp_size: {lay.dp}" + (", enable_dp_attention: true" if lay.dp_attention else "")
    return f"{keys} read as{how} (simcast's spelling: {ours})"

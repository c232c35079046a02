"""The engines' own spelling of a layout read into simcast's: SGLang ``--tp-size/--dp-size/--enable-dp-attention``
and TensorRT-LLM ``tensor_parallel_size``/``enable_attention_dp`` (pure; the options and the service YAML
use it: :mod:`simcast.api.layout_spelling`, :mod:`simcast.serving.yaml_layout`).

simcast's ``--tp`` is the tensor-parallel size of one attention group (one DP rank) and ``--dp`` the
number of DP ranks or replicas, so the world is ``tp · pp · dp``. SGLang and TensorRT-LLM count
differently: their TP size is every GPU of one pipeline stage of one engine, attention-DP ranks included.

- SGLang ``--tp-size T --dp-size D --enable-dp-attention``: ``T`` GPUs per stage, attention DP ``D`` x
  attention TP ``T / D`` (sgl-project/sglang ``python/sglang/srt/layers/dp_attention.py``@2aa2e2d0
  ``compute_dp_attention_world_info``: ``attn_tp_size = tp_size // dp_size``; ``server_args.py``
  ``ServerArgs._handle_data_parallelism``: ``dp_size == 1`` switches ``enable_dp_attention`` off, then
  ``assert tp_size % dp_size == 0``). Without ``--enable-dp-attention``, ``--dp-size D`` is ``D``
  replicas of ``T`` GPUs each (``managers/data_parallel_controller.py``): simcast ``--tp T --dp D``.
- TensorRT-LLM ``tensor_parallel_size T`` with ``enable_attention_dp: true``: ``T`` GPUs per stage
  (NVIDIA/TensorRT-LLM ``tensorrt_llm/mapping.py``@05ebebb2 ``Mapping``: ``world_size = tp_size · pp_size
  · cp_size``, ``moe_tp_size · moe_ep_size = tp_size``), each running attention alone: attention DP ``T``
  x attention TP 1 (``_torch/models/modeling_deepseekv3.py`` ``_compute_mlp_tp_size``: "If using attention
  DP, the MLP also uses DP instead of TP"). Without it, ``T`` is the TP size.
- vLLM ``--tensor-parallel-size T --data-parallel-size D`` already means simcast's ``--tp T --dp D``.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require


@dataclass(frozen=True, kw_only=True)
class EngineLayout:
    """A layout as simcast counts it: ``tp`` attention TP per DP rank, ``dp`` DP ranks (attention-DP ranks
    when ``dp_attention``, else independent replicas), ``gpus_per_stage = tp · dp``; ``reading`` says how the
    engine's flags were read."""

    tp: int
    dp: int
    dp_attention: bool
    reading: str


def engine_layout(
    *, tp_size: int, dp_size: int | None, enable_dp_attention: bool, enable_attention_dp: bool, pp: int
) -> EngineLayout:
    """The layout of SGLang's ``--tp-size/--dp-size/--enable-dp-attention`` or TensorRT-LLM's
    ``tensor_parallel_size``/``enable_attention_dp`` (module docstring: the sources)."""
    require(tp_size >= 1, "--tp-size", tp_size, "must be >= 1")
    require(
        not (enable_attention_dp and dp_size is not None),
        "--dp-size",
        dp_size,
        "TensorRT-LLM's --enable-attention-dp makes every GPU of --tp-size an attention-DP rank (no --dp-size); "
        "SGLang's spelling is --tp-size T --dp-size D --enable-dp-attention",
    )
    d = tp_size if enable_attention_dp else (dp_size or 1)
    require(d >= 1, "--dp-size", d, "must be >= 1")
    attention = (enable_dp_attention or enable_attention_dp) and d > 1
    flags = f"--tp-size {tp_size}" + (f" --dp-size {dp_size}" if dp_size is not None else "")
    switch = " --enable-dp-attention" if enable_dp_attention else ""
    flags += " --enable-attention-dp" if enable_attention_dp else switch
    if attention:
        require(
            tp_size % d == 0,
            "--dp-size",
            d,
            f"must divide --tp-size {tp_size}: with DP attention --tp-size counts every GPU of a stage and attention "
            "TP is tp-size/dp-size (SGLang server_args.py: assert tp_size % dp_size == 0)",
        )
        tp, world = tp_size // d, tp_size * pp
        how = f"attention DP {d} x attention TP {tp} over the {tp_size} GPUs of each stage"
    else:
        tp, world = tp_size, tp_size * pp * d
        how = f"TP {tp_size}" + (f", {d} replicas" if d > 1 else "")
        if dp_size == 1:
            how += " (no attention DP at --dp-size 1: SGLang switches --enable-dp-attention off)"
    simcast = f"--tp {tp}" + (f" --dp {d}" if d > 1 else "") + (" --dp-attention" if attention else "")
    reading = f"{flags} read as the engine counts GPUs: {world} GPUs, {how}" + (f", PP {pp}" if pp > 1 else "")
    return EngineLayout(tp=tp, dp=d, dp_attention=attention, reading=f"{reading} (simcast: {simcast})")

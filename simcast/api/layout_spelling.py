"""The engines' own spelling of a layout, read into simcast's.

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

:func:`engine_layout` reads the engine spelling; :func:`apply_engine_spelling` puts it into an options
object's simcast fields (refusing a simcast field given with another meaning), :func:`layout_reading`
says in one line how it read them (printed under the run's header).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

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


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


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


def uses_engine_spelling(o: Any) -> bool:
    """``o`` gives its layout in an engine's spelling (``--tp-size``, ``--dp-size``, ``--enable-attention-dp``)."""
    return o.tp_size is not None or o.dp_size is not None or bool(o.enable_attention_dp)


def _read(o: Any) -> EngineLayout | None:
    """``o``'s engine-spelled layout (None: simcast's spelling, or a keyword of the wrong type, which the
    options' type check reports naming the keyword)."""
    if not uses_engine_spelling(o):
        return None
    hint = f" (here --tp-size {o.tp}, not --tp {o.tp})" if _int(o.tp) and o.tp > 1 else ""
    require(
        o.tp_size is not None,
        "--tp-size",
        None,
        f"{'--dp-size' if o.dp_size is not None else '--enable-attention-dp'} is an engine's spelling: give the "
        f"engine's TP size with it{hint} (--tp-size: every GPU of a stage, as SGLang's --tp-size and TensorRT-LLM's "
        "tensor_parallel_size count them), or write simcast's --tp (attention TP per DP rank) and --dp",
    )
    if not all(_int(v) for v in (o.tp_size, o.pp)) or not (o.dp_size is None or _int(o.dp_size)):
        return None
    return engine_layout(
        tp_size=o.tp_size,
        dp_size=o.dp_size,
        enable_dp_attention=bool(o.dp_attention),
        enable_attention_dp=bool(o.enable_attention_dp),
        pp=o.pp,
    )


def layout_reading(o: Any) -> str:
    """How ``o``'s engine-spelled layout flags were read, in one line ("" when they are simcast's)."""
    lay = _read(o)
    return "" if lay is None else lay.reading


def apply_engine_spelling(o: Any) -> None:
    """Set the simcast fields of the frozen options dataclass ``o`` (``tp``, ``dp``, ``dp_attention``;
    ``num_devices`` where ``o`` has it) from its engine-spelled ones; a simcast field given with another value
    than its default or the one read is one error (two spellings of the layout disagreeing). Idempotent."""
    lay = _read(o)
    if lay is None:
        return
    dp_default = next(f.default for f in dataclasses.fields(o) if f.name == "dp")
    given = lay.reading.split(" read as", 1)[0]
    require(
        o.tp in (1, lay.tp),
        "--tp",
        o.tp,
        f"is simcast's attention TP per DP rank, {lay.tp} in {given}: give one spelling of the layout "
        "(--tp-size with --dp-size, or simcast's --tp with --dp)",
    )
    require(
        o.dp in (dp_default, lay.dp),
        "--dp",
        o.dp,
        f"is simcast's DP ranks, {lay.dp} in {given}: give one spelling of the layout",
    )
    world = lay.tp * lay.dp * o.pp
    if hasattr(o, "num_devices"):
        require(
            o.num_devices in (None, world),
            "--num-devices",
            o.num_devices,
            f"{given} runs {world} GPUs",
        )
        object.__setattr__(o, "num_devices", world)
    object.__setattr__(o, "tp", lay.tp)
    if o.dp is not None or not hasattr(o, "num_devices"):
        object.__setattr__(o, "dp", lay.dp)
    object.__setattr__(o, "dp_attention", lay.dp_attention)

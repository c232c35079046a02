"""The options' layout in an engine's own spelling (``--tp-size``, ``--dp-size``, ``--enable-attention-dp``)
put into simcast's fields (``--tp`` attention TP per DP rank, ``--dp``, ``--dp-attention``).

How each engine's flags are read, with sources: :mod:`simcast.core.layout_spelling`.
:func:`apply_engine_spelling` sets an options object's simcast fields (refusing a simcast field given with
another value), :func:`layout_reading` says in one line how it read them (printed under the run's header).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from simcast.core.errors import require
from simcast.core.layout_spelling import EngineLayout, engine_layout


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def uses_engine_spelling(o: Any) -> bool:
    """``o`` gives its layout in an engine's spelling (``--tp-size``, ``--dp-size``, ``--enable-attention-dp``)."""
    return o.tp_size is not None or o.dp_size is not None or bool(o.enable_attention_dp)


def _read(o: Any) -> EngineLayout | None:
    """``o``'s engine-spelled layout (None: simcast's spelling, or a keyword of the wrong type, which the
    options' type check reports naming the keyword)."""
    typed = all(v is None or _int(v) for v in (o.tp_size, o.dp_size)) and isinstance(o.enable_attention_dp, bool)
    if not uses_engine_spelling(o) or not typed:
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
    pp = getattr(o, "pp", 1)  # a bare MoELayoutOptions has no tp/pp/dp: one stage
    if not all(_int(v) for v in (o.tp_size, pp)) or not (o.dp_size is None or _int(o.dp_size)):
        return None
    return engine_layout(
        tp_size=o.tp_size,
        dp_size=o.dp_size,
        enable_dp_attention=bool(o.dp_attention),
        enable_attention_dp=bool(o.enable_attention_dp),
        pp=pp,
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
    if lay is None or not hasattr(o, "tp"):
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

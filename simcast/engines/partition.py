"""Named pipeline layer partitions (``--partition``): the engines' own rules (each engine module's
``partition_rule`` and ``partition_order``), ``uniform``, ``balanced`` and explicit counts, the typed
:class:`Partition` parsed once from them, and the stage plan they give
(:class:`simcast.core.plan.PipelineStagePlan`). Pure functions; errors are one line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from simcast.core.errors import SimcastInputError, require
from simcast.core.plan import PipelineStageInfo, PipelineStagePlan, SendRecvEdge, StageModuleSpec
from simcast.engines import NO_ENGINE, REGISTRY

PARTITION_ENV_VARS = tuple(e.partition_env_var for e in REGISTRY.values() if e.partition_env_var)
"""The engines' environment variables for explicit layer counts; ``--partition`` takes their values as
written (``8,8,8,8``) or the whole assignment (``SGLANG_PP_LAYER_PARTITION=8,8,8,8``)."""

PARTITION_RULES: dict[str, str] = {
    "uniform": "ceil(L/P) layers per stage, the last stage truncated (the RFC's rule)",
    **{e.name: e.partition_rule for e in REGISTRY.values() if e.partition_rule},
    "balanced": "layer counts minimising the slowest stage (simcast.sim.partition)",
}
"""Named partition rules and where each comes from."""


def default_partition(engine: str | None) -> str:
    """The layer partition an engine applies when no explicit one is given (``vllm`` for none/unknown)."""
    return REGISTRY.get(engine or NO_ENGINE, REGISTRY[NO_ENGINE]).partition_name


_MAX_PARTITION_CHARS = 8 * 1024
"""Longest explicit partition string read (a count of up to 6 digits and a comma per stage, PP <= 1024)."""

_PARTITION_ALLOWED = (
    f"allowed: {', '.join(PARTITION_RULES)}, or comma-separated layer counts (ASCII digits) like "
    f"4,6,6,4 (also as {' or '.join(f'{v}=4,6,6,4' for v in PARTITION_ENV_VARS)})"
)


def canonical_partition(partition: str) -> str:
    """``partition`` as simcast names it: a rule name, or explicit counts ``"8,8,8,8"`` (an engine env-var
    assignment ``VLLM_PP_LAYER_PARTITION=8,8,8,8``, quotes and spaces accepted); anything else (other
    digits than ASCII, ``_``, signs) is a one-line :class:`SimcastInputError`."""
    s = partition.strip()
    name, eq, value = s.partition("=")
    if eq and name.strip() in PARTITION_ENV_VARS:
        s = value.strip()
    s = s.strip("\"'").strip()
    if s in PARTITION_RULES:
        return s
    # ASCII digits only: int() also reads "1_4" and Arabic-Indic or full-width digits
    items = s.split(",")
    require(
        len(s) <= _MAX_PARTITION_CHARS and all(re.fullmatch(r" *[0-9]{1,6} *", x) for x in items),
        "--partition",
        partition,
        _PARTITION_ALLOWED,
    )
    return ",".join(x.strip() for x in items)


def _spread(total_layers: int, pp: int, order: list[int]) -> tuple[int, ...]:
    base, rem = divmod(total_layers, pp)
    counts = [base] * pp
    for i in order[:rem]:
        counts[i] += 1
    return tuple(counts)


def partition_layers(total_layers: int, pp: int, partition: str) -> tuple[int, ...]:
    """Layer count per stage.

    - ``uniform``: the RFC's ``ceil(L/P)`` per stage, the last one truncated.
    - ``vllm``: ``L // P`` each, the remainder spread over the stages before the
      last, as vLLM's ``get_pp_indices`` does (22/4 -> 5, 6, 6, 5).
    - ``sglang``: the remainder on the last stages, as SGLang's ``get_pp_indices`` (22/4 -> 5, 5, 6, 6).
    - ``trtllm``: the remainder on the first stages, as TensorRT-LLM's ``pp_layers`` (22/4 -> 6, 6, 5, 5).
    - explicit: ``"4,6,6,4"`` (or ``VLLM_PP_LAYER_PARTITION=4,6,6,4``), which must sum to ``total_layers``.
    - ``balanced`` depends on stage costs and is resolved by :mod:`simcast.sim.partition` first.
    """
    require(total_layers >= 1, "model.num_hidden_layers", total_layers, "must be >= 1")
    require(pp >= 1, "pp_size", pp, "must be >= 1")
    require(pp <= total_layers, "pp_size", pp, f"must be <= the model's {total_layers} layers")
    given, partition = partition, canonical_partition(partition)
    if partition == "uniform":
        per = math.ceil(total_layers / pp)
        counts = tuple(max(0, min((i + 1) * per, total_layers) - min(i * per, total_layers)) for i in range(pp))
    elif partition in REGISTRY and REGISTRY[partition].partition_rule:  # the engine's own rule
        counts = _spread(total_layers, pp, REGISTRY[partition].partition_order(pp))
    elif partition == "balanced":
        raise SimcastInputError(
            "--partition",
            given,
            "balanced needs stage costs: resolve it with "
            "simcast.sim.partition.resolve_partition (simulate/serving do) before building "
            "the plan",
        )
    else:
        items = partition.split(",")  # ASCII digit counts: checked by canonical_partition
        require(len(partition) <= 8 * pp, "--partition", given, f"needs exactly pp_size={pp} layer counts")
        counts = tuple(int(x) for x in items)
        require(len(counts) == pp, "--partition", given, f"needs exactly pp_size={pp} layer counts")
        require(
            sum(counts) == total_layers,
            "--partition",
            given,
            f"layer counts must sum to the model's {total_layers} layers (got {sum(counts)})",
        )
    empty = [i for i, c in enumerate(counts) if c <= 0]
    require(
        not empty,
        "--partition",
        given,
        f"stage(s) {empty} would get no decoder layer ({list(counts)}); every stage needs >= 1 layer",
    )
    return counts


@lru_cache(maxsize=256)
def build_pipeline_stage_plan(
    total_layers: int, pp: int, partition: Partition | str = "vllm", tie_word_embeddings: bool = False
) -> PipelineStagePlan:
    """Stage infos, edge-module ownership and send/recv edges for ``pp`` stages (a frozen plan, built once
    per argument set: the demo search asks for the same few plans ~300 times); ``partition`` as text or
    a parsed :class:`Partition` (its text)."""
    partition = partition.text if isinstance(partition, Partition) else partition
    counts = partition_layers(total_layers, pp, partition)
    infos, specs, start = [], [], 0
    for i, c in enumerate(counts):
        infos.append(
            PipelineStageInfo(
                stage_id=i, num_stages=pp, start_layer=start, end_layer=start + c, total_layers=total_layers
            )
        )
        last = i == pp - 1
        specs.append(
            StageModuleSpec(
                stage_id=i,
                embedding=i == 0,
                final_norm=last,
                lm_head=last,
                embedding_weights=i == 0 or (last and tie_word_embeddings),
                input_kind="input_ids" if i == 0 else "inputs_embeds",
            )
        )
        start += c
    edges = tuple(SendRecvEdge(src_stage=i, dst_stage=i + 1) for i in range(pp - 1))
    return PipelineStagePlan(
        stage_infos=tuple(infos), stage_module_specs=tuple(specs), send_recv_edges=edges, partition=partition
    )


@dataclass(frozen=True, kw_only=True)
class Partition:
    """Layers per pipeline stage: ``text`` as simcast names it (a rule of :data:`PARTITION_RULES`, or
    explicit counts ``"8,8,8,8"`` as written, without spaces) and ``counts``, the explicit layer counts
    per stage (``()`` for a rule). Build it with :meth:`parse` (or :meth:`of`, :meth:`explicit`)."""

    text: str = "vllm"
    counts: tuple[int, ...] = ()

    def __str__(self) -> str:
        return self.text

    @classmethod
    def parse(cls, partition: str) -> Partition:
        """``partition`` read (:func:`canonical_partition`: a rule name, or explicit counts, an engine
        env-var assignment accepted); anything else is a one-line :class:`SimcastInputError`."""
        require(isinstance(partition, str), "--partition", partition, _PARTITION_ALLOWED)
        text = canonical_partition(partition)
        if text in PARTITION_RULES:
            return cls(text=text)
        return cls(text=text, counts=tuple(int(x) for x in text.split(",")))

    @classmethod
    def of(cls, partition: Partition | str) -> Partition:
        """``partition`` as it is, or parsed (:meth:`parse`) when given as text."""
        return partition if isinstance(partition, Partition) else cls.parse(partition)

    @classmethod
    def explicit(cls, counts: tuple[int, ...] | list[int]) -> Partition:
        """The explicit partition of ``counts`` layers per stage."""
        return cls(text=",".join(map(str, counts)), counts=tuple(counts))

    @classmethod
    def engine_default(cls, engine: str | None) -> Partition:
        """The partition an engine applies when no explicit one is given (``vllm`` for none/unknown)."""
        return cls(text=default_partition(engine))

    @classmethod
    def given(cls, partition: Partition | str | None, engine: str | None) -> Partition:
        """``partition`` as given (text parsed), or the ``engine``'s own rule when not given (None or "")."""
        return cls.of(partition) if partition else cls.engine_default(engine)

    @property
    def is_balanced(self) -> bool:
        """The cost-driven rule, resolved to explicit counts by :mod:`simcast.sim.partition`."""
        return self.text == "balanced"

    def layers(self, total_layers: int, pp: int) -> tuple[int, ...]:
        """Layer count per stage of a ``total_layers`` model over ``pp`` stages (:func:`partition_layers`)."""
        return partition_layers(total_layers, pp, self.text)

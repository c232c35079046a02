"""Speculative decoding as one interface the serving code calls without asking whether it is on.

A :class:`SpeculativeScheme` answers everything the steady-state estimate, the request-level simulator,
the memory model and the notes ask of speculative decoding: tokens a decoding request emits per step,
query tokens it verifies per step, the draft's weights and KV on the last stage, the draft's time per step,
and the notes that state it. :class:`NoSpeculation` answers with the neutral values (1 token per step,
1 query token, no draft: 0 bytes, 0 s, no notes), :class:`DraftSpeculation` with a
:class:`~simcast.serving.speculative.spec.SpeculativeSpec`'s (:mod:`simcast.serving.speculative.draft` for the draft).
:func:`scheme_of` is the one place an absent spec (None: off) becomes a scheme.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from simcast.core.assumption import Assumption, Topic, note
from simcast.core.model_spec import ModelSpec
from simcast.core.specs import ParallelSpec
from simcast.serving.speculative.draft import FC_NOTE, draft_coster, draft_kv_bytes_per_token, draft_weight_bytes
from simcast.serving.speculative.spec import SpeculativeSpec
from simcast.serving.step import NO_DRAFT, DraftTime, StepCoster


class SpeculativeScheme(Protocol):
    """What serving asks of speculative decoding (units in the method names' docstrings)."""

    @property
    def active(self) -> bool:
        """A draft runs (the run is described as speculative)."""
        ...

    @property
    def label(self) -> str:
        """A short name for tables (``eagle3 k=3``; "" when off)."""
        ...

    @property
    def tokens_per_step(self) -> float:
        """Tokens a decoding request emits per step (expected value, dimensionless)."""
        ...

    @property
    def verify_tokens(self) -> int:
        """Query tokens per decoding request in one step (tokens)."""
        ...

    def draft_weight_bytes(self, model: ModelSpec, par: ParallelSpec) -> int:
        """The draft's weights on one rank of the last stage (bytes)."""
        ...

    def draft_kv_bytes_per_token(self, model: ModelSpec, tp: int, kv_cache_dtype: str) -> int:
        """KV bytes the draft adds per cached token on one rank of the last stage."""
        ...

    def draft_time(self, target: StepCoster) -> DraftTime:
        """Seconds the draft adds to the last stage, as a function of (drafting requests, context)."""
        ...

    def memory_note(self, model: ModelSpec, par: ParallelSpec, kv_cache_dtype: str) -> str:
        """The clause the memory note ends with ("" when the draft takes no memory)."""
        ...

    def serving_notes(self) -> tuple[Assumption, ...]:
        """The steady-state estimate's speculative assumptions (none when off)."""
        ...

    def bench_notes(self) -> list[str]:
        """The request-level run's speculative assumption lines (none when off)."""
        ...


@dataclass(frozen=True, kw_only=True)
class NoSpeculation:
    """Speculative decoding off: every answer is the neutral value."""

    active: bool = False
    label: str = ""
    tokens_per_step: float = 1.0
    verify_tokens: int = 1

    def draft_weight_bytes(self, model: ModelSpec, par: ParallelSpec) -> int:
        return 0

    def draft_kv_bytes_per_token(self, model: ModelSpec, tp: int, kv_cache_dtype: str) -> int:
        return 0

    def draft_time(self, target: StepCoster) -> DraftTime:
        return NO_DRAFT

    def memory_note(self, model: ModelSpec, par: ParallelSpec, kv_cache_dtype: str) -> str:
        return ""

    def serving_notes(self) -> tuple[Assumption, ...]:
        return ()

    def bench_notes(self) -> list[str]:
        return []


NO_SPECULATION = NoSpeculation()
"""The scheme of a run without speculative decoding."""


@dataclass(frozen=True, kw_only=True)
class DraftSpeculation:
    """Speculative decoding as ``spec`` gives it: ``k`` draft passes on the last stage and a verify step of
    ``k + 1`` tokens per decoding request, emitting ``1 + E`` tokens per step."""

    spec: SpeculativeSpec
    active: bool = True

    @property
    def label(self) -> str:
        return f"{self.spec.method} k={self.spec.k}"

    @property
    def tokens_per_step(self) -> float:
        return self.spec.tokens_per_step

    @property
    def verify_tokens(self) -> int:
        return self.spec.verify_tokens

    def draft_weight_bytes(self, model: ModelSpec, par: ParallelSpec) -> int:
        return draft_weight_bytes(model, self.spec, par)

    def draft_kv_bytes_per_token(self, model: ModelSpec, tp: int, kv_cache_dtype: str) -> int:
        return draft_kv_bytes_per_token(model, self.spec, tp, kv_cache_dtype)

    def draft_time(self, target: StepCoster) -> DraftTime:
        return draft_coster(target, self.spec)

    def memory_note(self, model: ModelSpec, par: ParallelSpec, kv_cache_dtype: str) -> str:
        spec = self.spec
        if spec.method == "ngram":  # a CPU lookup: no draft weights or KV
            return ""
        return (
            f"; the {spec.method} draft takes {self.draft_weight_bytes(model, par) / 2**30:.2f} GiB of "
            f"weights and {self.draft_kv_bytes_per_token(model, par.tp, kv_cache_dtype)} KV bytes "
            "per token on the last stage"
        )

    def serving_notes(self) -> tuple[Assumption, ...]:
        spec = self.spec
        tpot_note = (
            f"speculative: TPOT = step cycle / {spec.tokens_per_step:.3f} tokens per step (the expected value, "
            "deterministic); the draft runs after the verify step on the last stage; not modelled: dynamic k, "
            "draft/target overlap, the draft's own CPU launch time" + ("" if spec.method == "ngram" else f"; {FC_NOTE}")
        )
        return (note(Topic.SPECULATIVE, spec.describe()), note(Topic.SPECULATIVE_TPOT, tpot_note))

    def bench_notes(self) -> list[str]:
        return [
            self.spec.describe(),
            "speculative: each decoding request emits the expected 1 + E tokens per step (deterministic, the "
            "fraction carried to its next step); the draft's passes run after the verify step on the last stage",
        ]


def scheme_of(spec: SpeculativeSpec | None) -> SpeculativeScheme:
    """The scheme of a user's speculative spec (None: speculative decoding off)."""
    return NO_SPECULATION if spec is None else DraftSpeculation(spec=spec)

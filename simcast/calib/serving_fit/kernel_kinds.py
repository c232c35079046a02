"""Step time per kernel kind, and a step coster that scales each kind by a factor (``calibrate-serving``'s
efficiency factors; pure).

A step's GPU time on one pipeline stage is the sum of its ops' times (:mod:`simcast.sim.batched`). The
ops fall in four kinds (:data:`KIND_OF_OP`): ``gemm`` (dense, quantised and expert GEMMs),
``attention_decode`` and ``attention_prefill`` (the attention kernels' time, split between the step's
decoding and prompt requests), ``collectives`` (TP all-reduce / all-gather, expert dispatch / combine);
the rest (norms, activations, sampling, cache writes) and the pipeline hops are not scaled.

Model: with factors ``f_k`` (1: simcast's kernel model as it is; 1.2: that kind runs 20 % slower on the
measured deployment), a stage's time is ``t + sum_k (f_k - 1) t_k`` where ``t`` is simcast's stage time
and ``t_k`` its ops of kind ``k``. Assumption: one factor per kind for every shape of that kind (the
deployment's kernels are uniformly faster or slower than simcast's tables; what varies with the shape is
left in the residuals).

A mixed step's attention (one kernel call over prompts and decodes) is split between the two kinds in
proportion to the attention time of its prompt groups and of its decode groups, each costed alone
(assumption: the kernel's time is about additive over the two parts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from simcast.core.specs import Batch
from simcast.serving.step import StepCoster

KINDS = ("gemm", "attention_decode", "attention_prefill", "collectives")
"""Kernel kinds that get a factor, in the order the fit and the profile list them."""
KIND_OF_OP = {
    "linear": "gemm",
    "simcast::quant_linear": "gemm",
    "simcast::moe_experts": "gemm",
    "simcast::attention": "attention",
    "simcast::attention_sliding": "attention",
    "simcast::mla_attention": "attention",
    "simcast::all_reduce": "collectives",
    "simcast::all_gather": "collectives",
    "simcast::moe_dispatch": "collectives",
    "simcast::moe_combine": "collectives",
}
"""Op name (:data:`simcast.cost.ops.formulas.OP_FORMULAS`) -> kind (``attention`` is split by the step)."""

KindTimes = tuple[dict[str, float], ...]
"""Per stage: kind -> seconds of that kind's ops in one step."""


class KindMemo:
    """Each batch's :data:`KindTimes` (they do not depend on the factors: shared by every trial)."""

    def __init__(self) -> None:
        self.times: dict[Batch, KindTimes] = {}


def _split(batch: Batch, verify_tokens: int) -> tuple[Batch | None, Batch | None]:
    """(decode part, prompt part) of ``batch``: groups whose query is the decode query length, and the rest."""
    dec = [(q, c, n) for q, c, n in zip(batch.query_lens, batch.context_lens, batch.counts) if q <= verify_tokens]
    pre = [(q, c, n) for q, c, n in zip(batch.query_lens, batch.context_lens, batch.counts) if q > verify_tokens]

    def make(g: list[tuple[int, int, int]]) -> Batch | None:
        return (
            Batch(query_lens=tuple(x[0] for x in g), context_lens=tuple(x[1] for x in g), counts=tuple(x[2] for x in g))
            if g
            else None
        )

    return make(dec), make(pre)


@dataclass(kw_only=True)
class KindScaledCoster(StepCoster):
    """A :class:`StepCoster` whose stage times scale each kernel kind by ``factors`` (module docstring);
    with every factor 1 its times are the plain coster's, bit for bit."""

    factors: dict[str, float] = field(default_factory=dict)
    kinds: KindMemo = field(default_factory=KindMemo, repr=False)

    def kind_times(self, batches: Sequence[Batch]) -> list[KindTimes]:
        """Each batch's seconds per kind per stage, the new ones costed in one pass."""
        memo = self.kinds.times
        new = list(dict.fromkeys(b for b in batches if b not in memo))
        if new:
            parts = [_split(b, self.verify_tokens) for b in new]
            extra = list(dict.fromkeys(p for pair in parts for p in pair if p is not None and p not in new))
            every = new + extra
            arrays = self._layout().op_arrays(every)
            raw: dict[Batch, list[dict[str, float]]] = {}
            for i, b in enumerate(every):
                stages = []
                for ops in arrays:
                    acc = dict.fromkeys((*KINDS, "attention"), 0.0)
                    for o in ops:
                        kind = KIND_OF_OP.get(o.op)
                        if kind:
                            acc[kind] += float(o.time_s[i]) * o.count
                    stages.append(acc)
                raw[b] = stages
            for b, (dec, pre) in zip(new, parts):
                memo[b] = tuple(_attribute(st, s, dec, pre, raw) for s, st in enumerate(raw[b]))
        return [memo[b] for b in batches]

    def stage_times_many(self, batches: Sequence[Batch | None]) -> list[tuple[float, ...]]:
        base = super().stage_times_many(batches)
        scale = {k: f - 1.0 for k, f in self.factors.items() if f != 1.0}
        if not scale:
            return base
        real = [b for b in batches if b is not None]
        kt = dict(zip(real, self.kind_times(real)))
        return [
            t if b is None else tuple(ts + sum(d * kt[b][s][k] for k, d in scale.items()) for s, ts in enumerate(t))
            for b, t in zip(batches, base)
        ]


def _attribute(
    stage: dict[str, float], s: int, dec: Batch | None, pre: Batch | None, raw: dict[Batch, list[dict[str, float]]]
) -> dict[str, float]:
    """Stage ``s``'s kind times with the attention split between decode and prompt groups."""
    out = {k: stage[k] for k in KINDS}
    att = stage["attention"]
    if dec is None or pre is None:
        out["attention_decode" if pre is None else "attention_prefill"] = att
        return out
    d, p = raw[dec][s]["attention"], raw[pre][s]["attention"]
    share = d / (d + p) if d + p > 0 else 0.5
    out["attention_decode"], out["attention_prefill"] = att * share, att * (1.0 - share)
    return out

"""How an engine moves MoE tokens between expert ranks and what it overlaps: the user's flags
(:class:`MoECommFlags`) and what the engine runs with them (:class:`MoECommPlan`, resolved by the engine's
module: ``simcast/engines/<engine>.py`` ``moe_comm_plan``).

The all-to-all's time: :mod:`simcast.cost.comm.deepep` (DeepEP) or :mod:`simcast.cost.comm.time` (the
link model); what overlaps: :mod:`simcast.cost.overlap`.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require

A2A_BACKENDS = ("none", "deepep", "deepep_low_latency", "deepep_high_throughput")
"""``--moe-a2a-backend`` values: ``none`` (the engine's default all-to-all, costed on the link table),
``deepep`` (SGLang ``--moe-a2a-backend deepep``, TensorRT-LLM's DeepEP alltoall; mode from
``--deepep-mode``), vLLM's ``--all2all-backend deepep_low_latency`` / ``deepep_high_throughput``."""
DEEPEP_MODES = ("auto", "normal", "low_latency")
"""``--deepep-mode``: ``auto`` = low latency for decode batches, normal for the others (SGLang's rule)."""


@dataclass(frozen=True, kw_only=True)
class MoECommFlags:
    """The user's MoE communication flags, as given (engine-neutral spelling)."""

    a2a_backend: str = "none"
    deepep_mode: str = "auto"
    two_batch_overlap: bool = False
    single_batch_overlap: bool = False

    def __post_init__(self) -> None:
        require(
            self.a2a_backend in A2A_BACKENDS,
            "--moe-a2a-backend",
            self.a2a_backend,
            f"allowed: {', '.join(A2A_BACKENDS)}",
        )
        require(
            self.deepep_mode in DEEPEP_MODES, "--deepep-mode", self.deepep_mode, f"allowed: {', '.join(DEEPEP_MODES)}"
        )

    @property
    def is_default(self) -> bool:
        """No MoE communication flag given (the engine's default path, costed as before)."""
        return self == MoECommFlags()


@dataclass(frozen=True, kw_only=True)
class MoECommPlan:
    """What the engine runs: DeepEP or not and in which mode, and the overlaps it schedules.

    ``tbo_min_tokens`` / ``tbo_min_decode_tokens``: the smallest batch (tokens) the engine splits in two
    micro-batches; ``normal_comm_sms``: SMs the DeepEP normal kernels hold while the GEMMs run beside them
    (two-batch overlap of a prefill); ``sbo_comm_sms``: SMs the combine holds under single-batch overlap;
    ``source``: where the engine's rules are read (file@commit)."""

    deepep: bool = False
    deepep_mode: str = "auto"
    two_batch_overlap: bool = False
    tbo_min_tokens: int = 2
    tbo_min_decode_tokens: int = 2
    single_batch_overlap: bool = False
    normal_comm_sms: int = 0
    sbo_comm_sms: int = 0
    source: str = ""

    def mode_for(self, is_decode: bool) -> str:
        """The DeepEP mode of a batch: ``low_latency`` or ``normal`` (``auto``: by the batch's phase)."""
        if self.deepep_mode != "auto":
            return self.deepep_mode
        return "low_latency" if is_decode else "normal"

    def splits(self, num_tokens: int, num_requests: int, is_decode: bool) -> bool:
        """Whether two-batch overlap splits a batch of ``num_tokens`` tokens in two micro-batches."""
        if not self.two_batch_overlap or num_tokens < 2:
            return False
        if is_decode:
            return num_requests >= 2 and num_tokens >= self.tbo_min_decode_tokens
        return num_tokens >= self.tbo_min_tokens

    @property
    def overlaps(self) -> bool:
        return self.two_batch_overlap or self.single_batch_overlap

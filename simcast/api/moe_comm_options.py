"""The MoE communication keywords shared by ``simulate``, ``optimize`` and ``bench-serve`` (declared once):
the all-to-all backend (DeepEP or the engine's default), DeepEP's mode, and the overlaps the engine
schedules (two-batch, single-batch). What each engine runs with them: its module's ``moe_comm_plan``."""

from __future__ import annotations

from dataclasses import dataclass

from simcast.api.options import Flag, opt
from simcast.core.moe_comm import A2A_BACKENDS, DEEPEP_MODES, MoECommFlags

MOE_COMM_FIELDS = ("moe_a2a_backend", "deepep_mode", "enable_two_batch_overlap", "enable_single_batch_overlap")
"""The fields of :class:`MoECommOptions`, in ``--help`` order (each command adds their flags)."""


@dataclass(frozen=True, kw_only=True)
class MoECommOptions:
    """The MoE communication keywords (see the module docstring)."""

    moe_a2a_backend: str = opt(
        "none",
        "MoE all-to-all backend: none (the engine's default, costed on the link table) or DeepEP",
        flag=Flag(
            names=("--moe-a2a-backend", "--all2all-backend"),
            help="MoE all-to-all: none (the engine's default) | deepep (SGLang --moe-a2a-backend deepep, "
            "TensorRT-LLM's DeepEP alltoall; mode from --deepep-mode) | deepep_low_latency | "
            "deepep_high_throughput (vLLM --all2all-backend): costed with DeepEP's model (per-node "
            "deduplication, NVLink + RDMA; simcast/cost/comm/deepep.py) [default none]",
            choices=A2A_BACKENDS,
        ),
    )
    deepep_mode: str = opt(
        "auto",
        "DeepEP mode: auto (low latency for decode batches, normal otherwise), normal or low_latency",
        flag=Flag(
            names=("--deepep-mode",),
            help="DeepEP kernels: auto = low_latency for decode batches, normal for the others (SGLang "
            "--deepep-mode) [default auto]",
            choices=DEEPEP_MODES,
        ),
    )
    enable_two_batch_overlap: bool = opt(
        False,
        "split each batch in two micro-batches whose MoE communication overlaps the other's compute",
        flag=Flag(
            names=("--enable-two-batch-overlap", "--enable-dbo"),
            help="two-batch overlap (SGLang --enable-two-batch-overlap, vLLM --enable-dbo): two micro-batches, "
            "each one's dispatch/combine hidden behind the other's compute (simcast/cost/overlap.py)",
            action="store_true",
        ),
    )
    enable_single_batch_overlap: bool = opt(
        False,
        "SGLang single-batch overlap: the shared experts run beside the combine",
        flag=Flag(
            names=("--enable-single-batch-overlap",),
            help="SGLang --enable-single-batch-overlap: the shared experts run on a second stream beside the "
            "combine, with the combine's SMs taken from them",
            action="store_true",
        ),
    )

    def moe_comm_flags(self) -> MoECommFlags:
        """The engine-neutral flags (checked)."""
        return MoECommFlags(
            a2a_backend=self.moe_a2a_backend,
            deepep_mode=self.deepep_mode,
            two_batch_overlap=self.enable_two_batch_overlap,
            single_batch_overlap=self.enable_single_batch_overlap,
        )

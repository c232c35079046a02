"""The MoE communication an engine runs for the user's flags (:class:`~simcast.core.moe_comm.MoECommFlags`
-> :class:`~simcast.core.moe_comm.MoECommPlan`): the shared reading each engine module starts from in its
``moe_comm_plan`` (the engine-specific parts stay in ``simcast/engines/<engine>.py``).

DeepEP's SM defaults: the normal kernels hold ``Buffer.num_sms`` = 20 SMs (``deepseek-ai/DeepEP``
``deep_ep/buffers/legacy.py`` @ dd758caf), which SGLang takes away from DeepGEMM while the two micro-batches
overlap (``deep_gemm_num_sms = total - DeepEPConfig.num_sms``, ``sgl-project/sglang``
``python/sglang/srt/operations_strategy.py`` @ 1e90555b); a single-batch-overlapped combine holds
``SGLANG_DEEPEP_LL_COMBINE_SEND_NUM_SMS`` = 32 SMs (``python/sglang/srt/single_batch_overlap.py`` @ 04d8ec18).
"""

from __future__ import annotations

from simcast.core.moe_comm import MoECommFlags, MoECommPlan

DEEPEP_NORMAL_SMS = 20
"""SMs of DeepEP's normal kernels (``Buffer.num_sms`` default, deep_ep/buffers/legacy.py @ dd758caf)."""
SBO_COMBINE_SMS = 32
"""SMs of the combine under SGLang's single-batch overlap (single_batch_overlap.py @ 04d8ec18)."""
FIXED_MODES = {"deepep_low_latency": "low_latency", "deepep_high_throughput": "normal"}
"""vLLM-style backend names that fix the DeepEP mode for every batch."""


def plan_of(flags: MoECommFlags, *, auto_mode: str = "auto", source: str = "", **overrides) -> MoECommPlan:
    """The plan ``flags`` ask for: DeepEP unless the backend is ``none``, its mode fixed by a vLLM-style name,
    else ``--deepep-mode`` (``auto``: ``auto_mode``, the engine's own choice), the overlaps as asked."""
    deepep = flags.a2a_backend != "none"
    mode = FIXED_MODES.get(flags.a2a_backend, flags.deepep_mode)
    return MoECommPlan(
        deepep=deepep,
        deepep_mode=auto_mode if mode == "auto" else mode,
        two_batch_overlap=flags.two_batch_overlap,
        single_batch_overlap=flags.single_batch_overlap,
        normal_comm_sms=DEEPEP_NORMAL_SMS if deepep else 0,
        sbo_comm_sms=SBO_COMBINE_SMS if flags.single_batch_overlap else 0,
        source=source,
        **overrides,
    )

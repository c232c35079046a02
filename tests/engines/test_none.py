"""``--engine none`` (simcast/engines/none.py): vLLM's limits, no CPU time, generic roofline kernels."""

from simcast.core.specs import Batch
from simcast.engines import ENGINES, get_engine
from simcast.engines.partition import default_partition
from simcast.engines.policy import engine_policy
from simcast.inputs.loaders import load_device

NONE = get_engine("none")


def test_vllm_limits_without_cpu_time_or_serving_path():
    dev = load_device("h100_sxm")
    pol, vllm = engine_policy("none", dev), engine_policy("vllm", dev)
    assert (pol.max_num_batched_tokens, pol.max_num_seqs, pol.mem_fraction) == (8192, 1024, 0.9)
    assert (pol.max_num_batched_tokens, pol.kv_admission) == (vllm.max_num_batched_tokens, vllm.kv_admission)
    assert pol.step_cpu_s(100) == 0.0 and pol.front_end_time_s(1000) == 0.0


def test_no_scheduler_no_engine_kernels_and_vllms_memory_flag():
    assert not NONE.schedules and NONE.kernel_engine is None and "none" not in ENGINES
    assert NONE.accepts_memory_flag("vllm") and not NONE.accepts_memory_flag("sglang")
    assert get_engine(None) is NONE


def test_nothing_captured_and_vllms_partition():
    assert not NONE.captured(Batch.decode(1, 10), 80, 1) and NONE.capture_limit(80, 1) == 0
    assert default_partition("none") == "vllm"
    assert NONE.decode_kernel_rules == {} and not NONE.emits


def test_capabilities_it_lacks_are_one_input_error():
    """`none` writes no launch lines and has no partition rule of its own: asking is a one-line input error
    naming the flag (never a NotImplementedError from the base class)."""
    import pytest

    from simcast.core.errors import SimcastInputError
    from simcast.engines import get_engine

    e = get_engine("none")
    with pytest.raises(SimcastInputError) as no_emit:
        e.disagg_router()
    with pytest.raises(SimcastInputError) as no_rule:
        e.partition_order(4)
    assert (no_emit.value.field, no_rule.value.field) == ("--emit", "--partition")
    assert not e.emits and not e.partition_rule

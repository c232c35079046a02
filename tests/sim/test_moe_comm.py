"""DeepEP and the overlaps end to end: each engine's plan for the flags, the step with and without them,
the many-batch path equal to the one-batch path, the default flags leaving the step as it was."""

from __future__ import annotations

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.moe_comm import MoECommFlags
from simcast.engines import get_engine


def test_sglang_auto_mode_is_low_latency_for_decode_only():
    plan = get_engine("sglang").moe_comm_plan(MoECommFlags(a2a_backend="deepep"))
    assert plan.deepep and plan.mode_for(True) == "low_latency" and plan.mode_for(False) == "normal"
    assert get_engine("sglang").moe_comm_flags(plan) == ["--moe-a2a-backend", "deepep", "--deepep-mode", "auto"]


def test_vllm_names_one_mode_and_has_no_sbo():
    v = get_engine("vllm")
    ll = v.moe_comm_plan(MoECommFlags(a2a_backend="deepep_low_latency", two_batch_overlap=True))
    assert ll.mode_for(False) == "low_latency" and ll.tbo_min_tokens == 512 and ll.tbo_min_decode_tokens == 32
    assert v.moe_comm_flags(ll) == ["--all2all-backend", "deepep_low_latency", "--enable-dbo"]
    assert not ll.splits(511, 1, False) and ll.splits(512, 1, False) and not ll.splits(31, 31, True)
    with pytest.raises(SimcastInputError):
        v.moe_comm_plan(MoECommFlags(a2a_backend="deepep"))
    with pytest.raises(SimcastInputError):
        v.moe_comm_plan(MoECommFlags(single_batch_overlap=True))


def test_trtllm_runs_low_latency_unless_told():
    t = get_engine("trtllm")
    assert t.moe_comm_plan(MoECommFlags(a2a_backend="deepep")).mode_for(False) == "low_latency"
    assert t.moe_comm_plan(MoECommFlags(a2a_backend="deepep_high_throughput")).mode_for(True) == "normal"


def test_bad_flag_is_one_input_error():
    with pytest.raises(SimcastInputError):
        MoECommFlags(a2a_backend="pplx")


def _spec(**extra):
    from simcast.api.step import StepOptions, step_spec

    base = dict(
        model="Qwen/Qwen3-30B-A3B",
        device="h100_sxm",
        tp=1,
        num_devices=16,
        ep=16,
        dp_attention=True,
        batch_size=8,
        input_length=1024,
        engine="sglang",
        microbatches=1,
    )
    return step_spec(StepOptions(**{**base, **extra}))


def _a2a_ms(report) -> float:
    return (
        sum(o.time_s * o.count for s in report.stages for o in s.ops if "moe_dispatch" in o.op or "moe_combine" in o.op)
        * 1e3
    )


@pytest.mark.slow  # traces Qwen3-30B-A3B (~15 s once)
def test_deepep_and_two_batch_overlap_end_to_end():
    from simcast.sim.batched import LayoutCoster
    from simcast.sim.simulate import simulate

    plain, deepep = simulate(_spec()), simulate(_spec(moe_a2a_backend="deepep"))
    # two nodes: per-node dedup and FP8 dispatch cut the all-to-all; nothing else moves
    assert _a2a_ms(deepep) < 0.5 * _a2a_ms(plain)
    assert deepep.latency_s - _a2a_ms(deepep) / 1e3 == pytest.approx(plain.latency_s - _a2a_ms(plain) / 1e3)
    tbo_spec = _spec(moe_a2a_backend="deepep", enable_two_batch_overlap=True)
    tbo = simulate(tbo_spec)
    assert _a2a_ms(tbo) < 0.05 * _a2a_ms(deepep)  # compute-heavy prefill: the all-to-all is hidden
    assert LayoutCoster(spec=tbo_spec).simulate(tbo_spec).latency_s == pytest.approx(tbo.latency_s, rel=1e-9)
    # no shared experts in Qwen3: single-batch overlap changes nothing
    assert simulate(_spec(moe_a2a_backend="deepep", enable_single_batch_overlap=True)).latency_s == pytest.approx(
        deepep.latency_s
    )


@pytest.mark.slow
def test_two_batch_overlap_never_slower_than_its_two_micro_batches_in_turn():
    """The same two micro-batches, overlapped and run one after the other (no SM share: decode, LL mode)."""
    from simcast.core.specs import Batch
    from simcast.cost.overlap import layer_parts, two_batch_costs
    from simcast.sim.overlap_costs import overlap_plan, tbo_halves
    from simcast.sim.simulate import cost_context, cost_stage, split_batch, stage_setups

    spec = _spec(moe_a2a_backend="deepep", enable_two_batch_overlap=True, phase="decode", batch_size=64)
    plan = overlap_plan(spec)
    assert plan is not None
    _, setups, _ = stage_setups(spec)
    st = setups[0]
    a, b = tbo_halves(plan, Batch.decode(64, 1024), split_batch)
    ca = cost_stage(st.trace, st.layer_counts, cost_context(spec, st, a), spec.model.dtype)
    cb = cost_stage(st.trace, st.layer_counts, cost_context(spec, st, b), spec.model.dtype)
    serial = sum(c.time_s * c.count for c in (*ca, *cb))
    over = sum(c.time_s * c.count for c in two_batch_costs(ca, cb))
    pa, pb = layer_parts(ca), layer_parts(cb)
    comm = sum(p.moe_layers * (p.dispatch_s + p.combine_s) for p in (pa, pb))
    assert max(serial - comm, comm) <= over <= serial


def test_default_flags_leave_the_context_as_it_was():
    from simcast.core.specs import Batch
    from simcast.deploy.deployment import Deployment
    from simcast.inputs.loaders import load_device, load_model
    from simcast.sim.simulate import moe_comm_fields

    d = Deployment(model=load_model("Qwen/Qwen3-30B-A3B"), device=load_device("h100_sxm"))
    assert moe_comm_fields(d.sim_spec(Batch.decode(1, 1)), "fp8_block") == {}

"""What an engine's PP loop adds to a microbatch's round trip (engine record ``pp_*``, SGLang's PP loop)."""

from __future__ import annotations

import pytest

from simcast.core.layout import pp_hop_path
from simcast.core.plan import SendRecvEdge
from simcast.core.specs import Batch, ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines.policy import engine_policy
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.step import StepCoster, microbatch_period_s, step_cycle_s


def test_sglang_turns_the_overlap_scheduler_off_and_shards_the_send_only_at_pp_over_one():
    dev = load_device("h200_sxm")
    one, four = engine_policy("sglang", dev, tp=8, pp=1), engine_policy("sglang", dev, tp=8, pp=4)
    assert one.overlap_cpu and not one.tp_sharded_send and not one.pp_output_return
    assert not four.overlap_cpu and four.tp_sharded_send and four.pp_output_return
    assert any("disable_overlap_schedule" in s for s in four.sources)
    vllm = engine_policy("vllm", dev, tp=8, pp=4)  # not read for vLLM: unchanged
    assert not vllm.tp_sharded_send and not vllm.pp_output_return


def test_return_hop_is_one_small_message_over_the_last_to_first_path():
    dev = load_device("h200_sxm")
    par = ParallelSpec(tp=8, pp=4, dp=1)  # 32 GPUs, 8 per node: each stage its own node
    coster = StepCoster(
        deployment=Deployment(model=load_model("Qwen/Qwen3-235B-A22B"), device=dev, parallel=par, partition="uniform"),
        policy=engine_policy("sglang", dev, tp=8, pp=4),
    )
    path = pp_hop_path(SendRecvEdge(src_stage=3, dst_stage=0), par, dev.links)
    assert path.cross_node
    want = path.latency_s + 8 * 32 / path.effective_bw_bytes_per_s  # 32 int64 next_token_ids
    assert coster.return_s(Batch.decode(32, 1000)) == pytest.approx(want)
    assert coster.spec(Batch.decode(32, 1000)).tp_sharded_send


def test_the_return_hop_lengthens_the_trip_not_the_stage_or_cpu_bounds():
    st, cpu = (1.0, 2.0, 1.0), 0.5
    assert step_cycle_s(st, cpu, 1, False, 0.25) == pytest.approx(0.5 + 4.0 + 0.25)  # serial: cpu + gpu + hop
    assert step_cycle_s(st, cpu, 1, True, 0.25) == pytest.approx(4.25)  # overlapped: max(cpu, gpu + hop)
    assert step_cycle_s(st, cpu, 4, False, 0.25) == pytest.approx(8.0)  # 4 x slowest stage binds
    assert microbatch_period_s([st, st], [cpu, cpu], False, [0.25, 0.25]) == pytest.approx(4.75)

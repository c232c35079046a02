"""Wide EP (issue 26): expert slots with redundant experts, the EPLB placement's busiest-rank load, and the
memory the replicas take; with no redundant experts and EPLB off, exactly today's model."""

import pytest

from simcast.core.moe_memory import moe_shard
from simcast.core.moe_placement import eplb_imbalance, expert_slots, load_profile, placement_imbalance, rank_imbalance
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.core.weights import layer_weight_bytes_at
from simcast.inputs.loaders import load_model


@pytest.fixture(scope="module")
def ds():
    return load_model("deepseek-ai/DeepSeek-V3")


def test_slots_hand_worked():
    assert expert_slots(256, 0, 8) == 32  # 256 / 8
    assert expert_slots(256, 32, 48) == 6  # 288 / 48: EP48 with 32 redundant experts
    assert expert_slots(256, 0, 72) == 4  # ceil(256 / 72): four slots, 32 of the 288 empty
    assert expert_slots(256, 32, 96) == 3


def test_profile_mean_one_and_extremes():
    p = load_profile(256, 1.315)
    assert sum(p) / len(p) == pytest.approx(1.0)
    assert max(p) == pytest.approx(1 + 0.315 * 255 / 256)  # the top bin's centre: 1 - a + 2a * 255.5 / 256


def test_no_redundant_no_eplb_is_todays_model():
    for ep in (1, 8, 32, 48, 72):
        for imb in (1.0, 1.315, 2.0):
            assert placement_imbalance(256, 0, ep, imb, eplb=False) == imb
            assert placement_imbalance(256, 64, ep, imb, eplb=False) == imb  # static slots: by id, not load


def test_eplb_hand_worked_small():
    """4 experts, loads 0.625 0.875 1.125 1.375 (imbalance 1.5), 2 ranks, no redundancy: packing heaviest first
    onto the lighter rank -> {1.375, 0.625} and {1.125, 0.875} = 2.0 each: perfectly balanced (1.0).
    With 2 ranks and 3 experts of loads 0.5 1.0 1.5 (imbalance 1.5 over 3) and 1 redundant: the 1.5 expert is
    split into two 0.75 replicas; items 1.0, 0.75, 0.75, 0.5 on 2 slots each -> {1.0, 0.5}, {0.75, 0.75}."""
    assert load_profile(4, 1.5) == pytest.approx([0.625, 0.875, 1.125, 1.375])
    assert eplb_imbalance(4, 0, 2, 1.5) == pytest.approx(1.0)
    assert load_profile(3, 1.5) == pytest.approx([2 / 3, 1.0, 4 / 3])
    # loads 2/3, 1, 4/3 -> the 4/3 expert gets the redundant slot: items 1, 2/3, 2/3, 2/3 -> packs {1, 2/3}, {2/3, 2/3}
    assert eplb_imbalance(3, 1, 2, 1.5) == pytest.approx((1 + 2 / 3) / 1.5)


def test_eplb_never_worse_than_the_hottest_expert_model():
    for r in (0, 16, 32):
        for ep in (8, 32, 48):
            assert 1.0 <= placement_imbalance(256, r, ep, 1.315, eplb=True) <= 1.315


def test_memory_grows_by_redundant_experts_over_ep(ds):
    """EP32 with 32 redundant experts: 9 slots per rank instead of 8 -> one more expert's bytes per layer per
    rank = 32 experts' bytes / 32 ranks; EP with R = 0 is today's shard."""
    base = ParallelSpec(tp=1, dp=32, ep=32)
    wide = ParallelSpec(tp=1, dp=32, ep=32, redundant_experts=32)
    assert moe_shard(ds, base).experts_local == 8 and moe_shard(ds, wide).experts_local == 9
    sd = sharded_dims(ds, 1)
    layer = ds.moe.first_k_dense
    extra = layer_weight_bytes_at(ds, sd, wide, layer) - layer_weight_bytes_at(ds, sd, base, layer)
    q = ds.quant
    expert_bytes = 3 * ds.hidden_size * ds.moe.expert_intermediate * (q.expert_bytes if q else ds.dtype_bytes)
    assert extra == pytest.approx(32 * expert_bytes / 32)
    assert moe_shard(ds, ParallelSpec(tp=1, dp=48, ep=48, redundant_experts=32)).experts_local == 6


def test_eplb_imbalance_reaches_the_cost(ds):
    par = ParallelSpec(tp=1, dp=48, ep=48, redundant_experts=32, eplb=True)
    spec = SimSpec(model=ds, device=_dev(), parallel=par, batch=Batch.decode(8, 1024))
    assert rank_imbalance(spec) == pytest.approx(eplb_imbalance(256, 32, 48, spec.expert_imbalance))
    off = SimSpec(model=ds, device=_dev(), parallel=ParallelSpec(tp=1, dp=48, ep=48), batch=Batch.decode(8, 1024))
    assert rank_imbalance(off) == off.expert_imbalance


def _dev():
    from simcast.inputs.loaders import load_device

    return load_device("h200_sxm")


def test_service_yaml_wide_ep(tmp_path):
    """serve-config reads the wide-EP keys into the layout (EP48 over 48 attention-DP ranks, 32 redundant)."""
    from simcast.serving.service_yaml import build_serving_config, read_service_yaml

    y = tmp_path / "s.yaml"
    y.write_text(
        "model: deepseek-ai/DeepSeek-V3\ndevice: h200_sxm\nruntime: sglang\n"
        "workload: {input_length: 1024, output_length: 64, batch_size: 8}\n"
        "parallel_config: {tp_size: 1, dp_size: 48, ep_size: 48, enable_dp_attention: true, "
        "ep_num_redundant_experts: 32, enable_eplb: true}\n"
    )
    par = build_serving_config(read_service_yaml(str(y)), {})[0].parallel
    assert (par.ep, par.redundant_experts, par.eplb, par.dp_attention) == (48, 32, True, True)

"""Two-batch and single-batch overlap (simcast/cost/overlap.py): hand-computed schedules and the bound
``max(C, M) <= t_TBO <= C + M`` (C: both micro-batches' compute, M: their communication)."""

from __future__ import annotations

import itertools

import pytest

from simcast.cost.ops.op_work import OpCost
from simcast.cost.overlap import LayerParts, layer_parts, single_batch_costs, two_batch_costs, two_batch_s


def _parts(c1: float, e: float, d: float, k: float, layers: int) -> LayerParts:
    return LayerParts(c1_s=c1, experts_s=e, dispatch_s=d, combine_s=k, moe_layers=layers, rest_s=0.0)


def test_balanced_schedule_by_hand():
    """c1 = experts = dispatch = combine = 1 per micro-batch: A.c1 [0,1], A.d [1,2] || B.c1 [1,2], B.d [2,3] ||
    A.e [2,3], A.k [3,4] || B.e [3,4], B.k [4,5]; each further layer adds 4 (both streams busy)."""
    p = _parts(1, 1, 1, 1, 1)
    assert two_batch_s(p, p) == pytest.approx(5.0)
    p3 = _parts(1, 1, 1, 1, 3)
    assert two_batch_s(p3, p3) == pytest.approx(4 * 3 + 1)


def test_compute_bound_schedule_hides_all_but_the_last_combine():
    """c1 = e = 2, d = k = 0.5: compute runs back to back (8 per layer); only B's last combine is exposed."""
    p = _parts(2, 2, 0.5, 0.5, 4)
    assert two_batch_s(p, p) == pytest.approx(8 * 4 + 0.5)


@pytest.mark.parametrize("c1,e,d,k", list(itertools.product((0.1, 1.0, 3.0), (0.2, 2.0), (0.05, 1.5), (0.3, 2.5))))
def test_bound_max_compute_comm_and_never_slower_than_serial(c1, e, d, k):
    p = _parts(c1, e, d, k, 5)
    t = two_batch_s(p, p)
    compute, comm = 2 * 5 * (c1 + e), 2 * 5 * (d + k)
    assert max(compute, comm) - 1e-12 <= t <= compute + comm + 1e-12


def _op(name: str, t: float, count: int, bound: str = "Cube", scope: str = "layer2") -> OpCost:
    return OpCost(op=name, scope=scope, count=count, flops=1.0, bytes=1.0, time_s=t, bound=bound)


def _stage(scale: float) -> tuple[OpCost, ...]:
    """A toy stage: an embedding (once), 2 dense layers' attention, 8 MoE layers."""
    return (
        _op("simcast::vocab_embedding", 0.1 * scale, 1, "Mem", "pre"),
        _op("simcast::mla_attention", 1.0 * scale, 2, "Cube", "layer0"),
        _op("simcast::mla_attention", 1.0 * scale, 8),
        _op("simcast::moe_dispatch", 0.8 * scale, 8, "Comm"),
        _op("simcast::moe_experts", 2.0 * scale, 8),
        _op("simcast::moe_combine", 1.6 * scale, 8, "Comm"),
        _op("simcast::quant_linear", 0.3 * scale, 8),
        _op("simcast::silu_and_mul", 0.05 * scale, 8, "Mem"),
        _op("simcast::quant_linear", 0.2 * scale, 8),
    )


def _total(costs) -> float:
    return sum(c.time_s * c.count for c in costs)


def test_two_batch_costs_sum_to_the_schedule_and_keep_the_rest():
    half = _stage(0.5)
    out = two_batch_costs(half, half)
    p = layer_parts(half)
    assert p.moe_layers == 8 and p.rest_s == pytest.approx(0.05 + 0.5 * 2)  # embedding + 2 dense attentions
    assert _total(out) == pytest.approx(2 * p.rest_s + two_batch_s(p, p))
    serial = 2 * _total(half)
    compute = serial - 2 * 8 * (0.4 + 0.8)
    assert max(compute, serial - compute) <= _total(out) <= serial
    # the non-communication ops are the halves' sums
    assert [c.time_s for c in out if "moe_d" not in c.op and "moe_c" not in c.op] == pytest.approx(
        [2 * c.time_s for c in half if "moe_d" not in c.op and "moe_c" not in c.op]
    )


def test_sm_share_slows_only_the_deepgemm_gemms_of_the_moe_layers():
    half = _stage(0.5)
    out = two_batch_costs(half, half, cube_slowdown=1.25)
    att = next(c for c in out if c.op.endswith("mla_attention") and c.scope == "layer2")
    assert att.time_s == pytest.approx(1.0)  # attention: not DeepGEMM
    exp = next(c for c in out if c.op.endswith("moe_experts"))
    assert exp.time_s == pytest.approx(2.0 * 1.25)


def test_single_batch_overlap_hides_the_combine_behind_the_shared_experts():
    st = _stage(1.0)
    out = single_batch_costs(st, comm_sms=32, total_sms=132)
    slow = 132 / 100
    shared = (0.3 + 0.05 + 0.2) * slow
    comb = next(c for c in out if c.op.endswith("moe_combine"))
    assert comb.time_s == pytest.approx(1.6 - shared)
    # per MoE layer: combine + shared = max(k, s') -> never slower than serial when k >= s'
    per_layer_before = 1.6 + 0.55
    per_layer_after = comb.time_s + shared
    assert per_layer_after == pytest.approx(max(1.6, shared)) and per_layer_after < per_layer_before

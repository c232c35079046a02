"""DeepEP all-to-all model against DeepEP's published V1 tables (``deepseek-ai/DeepEP`` docs/legacy.md
@ dd758caf, development data), and the routing statistics it rests on, hand-computed."""

from __future__ import annotations

import math

import pytest

from simcast.cost.comm import deepep as d

H800_NVL, H800_IB = 200e9, 50e9

# (EP, dispatch latency us, combine latency us): low-latency kernels, 128 tokens, hidden 7168, top-8
LL_TABLE = [(8, 77, 114), (16, 118, 195), (32, 155, 273), (64, 173, 314), (128, 192, 369), (256, 194, 360)]
LL_TOLERANCE = 0.08  # every row; EP8/16/256 are the fit's rows (exact), EP32/64/128 are checks
# (EP, dispatch GB/s, combine GB/s): normal kernels, 4096 tokens, top-4 groups (nodes), top-8
NORMAL_TABLE = [(8, 153, 158), (16, 43, 43), (32, 58, 57), (64, 51, 50)]
NORMAL_TOLERANCE = 0.15  # EP8/EP32 are the fit's rows; EP16 (+10/+13%) and EP64 (-2%) are checks


def _ll(ep: int, phase: str) -> float:
    call = d.DeepEPCall(
        mode="low_latency",
        phase=phase,
        tokens=128,
        hidden=7168,
        top_k=8,
        num_experts=256,
        ep=ep,
        ranks_per_node=8,
        intra_bw_bytes_per_s=H800_NVL,
        inter_bw_bytes_per_s=H800_IB,
    )
    return d.deepep_s(call)


@pytest.mark.parametrize("ep,dispatch_us,combine_us", LL_TABLE)
def test_low_latency_reproduces_the_table(ep, dispatch_us, combine_us):
    assert _ll(ep, "dispatch") == pytest.approx(dispatch_us * 1e-6, rel=LL_TOLERANCE)
    assert _ll(ep, "combine") == pytest.approx(combine_us * 1e-6, rel=LL_TOLERANCE)


def test_low_latency_bandwidth_column_is_the_bytes_over_the_time():
    """The table's bandwidth is test_low_latency.py's bytes (T·k·(h + h/32 + 16)) over its latency: 98 GB/s at EP8."""
    sent = 128 * 8 * (7168 + 7168 / 128 * 4 + 16)
    assert sent / _ll(8, "dispatch") / 1e9 == pytest.approx(98, rel=0.02)


def _normal(ep: int, phase: str) -> tuple[float, float]:
    """(time s, the table's bandwidth as the test counts it, GB/s)."""
    m = max(1, ep // 8)
    call = d.DeepEPCall(
        mode="normal",
        phase=phase,
        tokens=4096,
        hidden=7168,
        top_k=8,
        num_experts=256,
        ep=ep,
        ranks_per_node=8,
        intra_bw_bytes_per_s=H800_NVL,
        inter_bw_bytes_per_s=H800_IB,
        expert_groups=m,  # test_internode.py: one group per node, top min(nodes, 4) groups
        topk_groups=min(m, 4),
    )
    t = d.deepep_s(call)
    tr = d.traffic_of(call)
    b = d.token_bytes(call)
    counted = 4096 * min(m, 4) * b if m > 1 else tr.nvlink_bytes  # RDMA: own node counted; NVLink: recv_x
    return t, counted / t / 1e9


@pytest.mark.parametrize("ep,dispatch_gbps,combine_gbps", NORMAL_TABLE)
def test_normal_reproduces_the_table(ep, dispatch_gbps, combine_gbps):
    assert _normal(ep, "dispatch")[1] == pytest.approx(dispatch_gbps, rel=NORMAL_TOLERANCE)
    assert _normal(ep, "combine")[1] == pytest.approx(combine_gbps, rel=NORMAL_TOLERANCE)


def test_the_test_routing_reaches_min_nodes_4():
    """test_internode.py's routing: every picked node group holds one of the top-8."""
    for m in (2, 4, 8, 16):
        n, grouped = d.nodes_per_token(256, 8, m, expert_groups=m, topk_groups=min(m, 4))
        assert grouped and n == pytest.approx(min(m, 4))


def test_nodes_per_token_uniform_and_deepseek_grouped():
    # uniform: 4 nodes of 64 experts, top-8: 4·(1 - C(192,8)/C(256,8))
    n, grouped = d.nodes_per_token(256, 8, 4)
    assert not grouped and n == pytest.approx(4 * (1 - math.comb(192, 8) / math.comb(256, 8)))
    # DeepSeek-V3 (n_group 8, topk_group 4) on 4 nodes: 2 groups per node, missed w.p. C(6,4)/C(8,4) = 15/70
    n, grouped = d.nodes_per_token(256, 8, 4, expert_groups=8, topk_groups=4)
    assert grouped and n == pytest.approx(4 * (1 - 15 / 70))
    # ... on 8 nodes: one group per node, 4 of 8 picked
    assert d.nodes_per_token(256, 8, 8, 8, 4)[0] == pytest.approx(4.0)
    # ... on 16 nodes (a group spans 2): the node is reached unless the group's guaranteed expert and all 4
    # others miss it
    miss = 0.5 * math.comb(128 - 4 - 16, 4) / math.comb(128 - 4, 4)
    assert d.nodes_per_token(256, 8, 16, 8, 4)[0] == pytest.approx(16 * 0.5 * (1 - miss))
    # never more nodes than experts or nodes
    for m in (2, 4, 8, 16, 32):
        assert d.nodes_per_token(256, 8, m, 8, 4)[0] <= min(8, m)


def test_per_node_dedup_lowers_fabric_bytes_by_the_derived_factor():
    """Inter-node bytes: once per destination node (N·(m-1)/m per token) against once per destination rank
    (R·(ep-g)/ep per token, rank-by-rank sends); DeepSeek-V3 routing, EP32 over 4 nodes, same payload."""
    tokens, b = 1000.0, 7392.0
    tr = d.normal_traffic(
        tokens, 7168, b, num_experts=256, top_k=8, ep=32, ranks_per_node=8, expert_groups=8, topk_groups=4
    )
    n = 4 * (1 - 15 / 70)
    assert tr.rdma_bytes == pytest.approx(tokens * n * 3 / 4 * b)
    r = d.distinct_ranks(256, 8, 32, selectable=128)  # 8 of the 4 picked groups' 128 experts, 8 per rank
    per_rank = tokens * r * 24 / 32 * b
    factor = per_rank / tr.rdma_bytes
    assert factor == pytest.approx(r * 24 / 32 / (n * 3 / 4))
    assert factor > 2.0  # 6.9 ranks vs 3.1 nodes per token
    # uniform routing: the factor R·(ep-g)/ep / (N·(m-1)/m) with the uniform N and R
    tr_u = d.normal_traffic(tokens, 7168, b, num_experts=256, top_k=8, ep=32, ranks_per_node=8)
    r_u, n_u = d.distinct_ranks(256, 8, 32), d.nodes_per_token(256, 8, 4)[0]
    assert tokens * r_u * 24 / 32 * b / tr_u.rdma_bytes == pytest.approx(r_u / n_u)


def test_intranode_has_no_fabric_bytes_and_faster_links_are_faster():
    tr = d.normal_traffic(100, 7168, 7392, num_experts=256, top_k=8, ep=8, ranks_per_node=8)
    assert tr.rdma_bytes == 0
    base = dict(mode="normal", phase="dispatch", tokens=8192, hidden=7168, top_k=8, num_experts=256, ep=32)
    slow = d.DeepEPCall(**base, ranks_per_node=8, intra_bw_bytes_per_s=450e9, inter_bw_bytes_per_s=25e9)
    fast = d.DeepEPCall(**base, ranks_per_node=8, intra_bw_bytes_per_s=450e9, inter_bw_bytes_per_s=50e9)
    assert d.deepep_s(fast) < d.deepep_s(slow)
    assert (
        d.deepep_s(d.DeepEPCall(**{**base, "ep": 1}, ranks_per_node=8, intra_bw_bytes_per_s=1, inter_bw_bytes_per_s=1))
        == 0
    )

"""Batch as request groups: weighted sizes, group-wise microbatch split, O(groups) costing."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.ops.attention_ops import attention_sums
from simcast.sim.simulate import simulate, split_batch


def test_counts_weight_every_size():
    b = Batch(query_lens=(1, 300), context_lens=(900, 0), counts=(1000, 2))
    assert b.num_requests == 1002
    assert b.num_tokens == 1000 + 600
    assert b.kv_tokens == 1000 * 900 + 1600
    assert b.groups == ((1, 900, 1000), (300, 0, 2))


def test_identical_entries_merge_so_equal_batches_compare_equal():
    assert Batch(query_lens=(1, 1, 1), context_lens=(5, 5, 5)) == Batch.decode(3, 5)
    assert Batch(query_lens=(1, 7, 1), context_lens=(5, 0, 5)).groups == ((1, 5, 2), (7, 0, 1))


def test_bad_count_is_an_input_error():
    with pytest.raises(SimcastInputError):
        Batch(query_lens=(1,), context_lens=(5,), counts=(0,))
    with pytest.raises(SimcastInputError):
        Batch(query_lens=(1, 2), context_lens=(5, 5), counts=(1,))


def test_attention_sums_scale_with_count():
    one = attention_sums((1, 300), (900, 40), (1, 1), 4)
    many = attention_sums((1, 300), (900, 40), (10**9, 10**9), 4)
    assert many == pytest.approx((one[0] * 10**9, one[1] * 10**9), rel=1e-12)


def test_attention_sums_vectorised_path_equals_loop():
    q = tuple(range(1, 200))
    c = tuple(range(1000, 1199))
    n = tuple((i % 7) + 1 for i in range(199))
    vec = attention_sums(q, c, n, 8)
    loop = tuple(sum(attention_sums((qi,), (ci,), (ni,), 8)[k] for qi, ci, ni in zip(q, c, n)) for k in range(2))
    assert vec == pytest.approx(loop, rel=1e-12)


def test_billion_identical_decodes_cost_like_the_scaled_small_case(qwen06b, h100):
    """Every per-token and per-request term is linear in the count: a step of 10**9 decodes has
    exactly 10**6 times the FLOPs and attention bytes of 1,000 (weights are read once, so bytes are not)."""
    spec = lambda n: SimSpec(model=qwen06b, device=h100, parallel=ParallelSpec(), batch=Batch.decode(n, 1000))  # noqa: E731
    big, small = simulate(spec(10**9)), simulate(spec(1000))
    for ob, os_ in zip(big.stages[0].ops, small.stages[0].ops):
        assert ob.op == os_.op
        if ob.op in ("linear", "simcast::attention"):
            assert ob.flops == pytest.approx(os_.flops * 10**6, rel=1e-9)
        if ob.op == "simcast::attention":
            assert ob.bytes == pytest.approx(os_.bytes * 10**6, rel=1e-9)
    assert big.latency_s > 1e3 * small.latency_s  # compute-bound at 1e9 tokens


groups_st = st.lists(
    st.tuples(st.integers(1, 5000), st.integers(0, 10**6), st.integers(1, 10**7)), min_size=1, max_size=8
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(groups=groups_st, m=st.integers(1, 16))
def test_split_batch_conserves_tokens_and_requests(groups, m):
    b = Batch(
        query_lens=tuple(g[0] for g in groups),
        context_lens=tuple(g[1] for g in groups),
        counts=tuple(g[2] for g in groups),
    )
    parts = split_batch(b, m)
    assert 1 <= len(parts) <= m
    assert sum(p.num_tokens for p in parts) == b.num_tokens
    if b.num_requests >= m or b.is_decode:
        assert sum(p.num_requests for p in parts) == b.num_requests
        sizes = [p.num_requests for p in parts]
        assert max(sizes) - min(sizes) <= 1
        assert len(set(parts)) <= 2 * len(b.groups) + 1  # a few distinct shapes, not one per request
    else:  # chunked prefill: every request appears in every chunk that has tokens for it
        assert max(p.num_requests for p in parts) == b.num_requests

"""Fitted kernel times never fall when a step's work grows (property tests over shapes, every shipped
device x engine): GEMM rows (tokens), attention requests / query tokens / context, routed-expert tokens and
all-reduce message bytes, as the simulator evaluates them (:mod:`simcast.cost.kernels.engine_cost`). Model
dimensions (N, K, heads, head size) are fixed by the weights and not part of the guarantee."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcast.cost.kernels import engine_cost
from simcast.cost.kernels.moe_kernels import padded_rows
from simcast.cost.ops.moe import active_experts, busiest_rank_pairs
from simcast.engines import ENGINES
from simcast.inputs.loaders import load_device, shipped_devices

CASES = [(d, e) for d in shipped_devices() for e in ENGINES if e in load_device(d).engines]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GEMM_NK = [(128, 128), (1024, 7168), (7168, 2048), (4096, 4096), (256, 16384), (57344, 8192)]
HEADS = [(32, 8, 128), (64, 8, 128), (8, 8, 128), (40, 8, 128), (16, 2, 64)]


def _le(a: float, b: float) -> bool:
    return a <= b * (1 + 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(("device", "engine"), CASES)
@SETTINGS
@given(m=st.integers(1, 20000), dm=st.integers(1, 600), nk=st.sampled_from(GEMM_NK))
def test_gemm_non_decreasing_in_rows(device, engine, m, dm, nk):
    dev = load_device(device)
    for fam in ("bf16", "fp8", "fp8_block"):
        for captured in (True, False):
            a = engine_cost.gemm_s(dev, engine, fam, m, *nk, captured=captured)
            b = engine_cost.gemm_s(dev, engine, fam, m + dm, *nk, captured=captured)
            if a is not None:
                assert _le(a[0], b[0]), (fam, m, m + dm, nk, a, b)


def _attn(dev, engine, q, c, n, hd, phase="auto"):
    got = engine_cost.attention_s(dev, engine, "bf16", (q,), (c,), *hd, phase=phase, counts=(n,))
    return None if got is None else got[0]


@pytest.mark.parametrize(("device", "engine"), CASES)
@SETTINGS
@given(
    q=st.integers(2, 8192),
    c=st.integers(0, 32768),
    n=st.integers(1, 64),
    dq=st.integers(0, 700),
    dc=st.integers(0, 5000),
    dn=st.integers(0, 16),
    hd=st.sampled_from(HEADS),
)
@pytest.mark.slow
def test_prefill_attention_non_decreasing_in_work(device, engine, q, c, n, dq, dc, dn, hd):
    dev = load_device(device)
    a = _attn(dev, engine, q, c, n, hd)
    if a is None:
        return
    for q2, c2, n2 in ((q + dq, c, n), (q, c + dc, n), (q, c, n + dn)):
        assert _le(a, _attn(dev, engine, q2, c2, n2, hd)), (q, c, n, q2, c2, n2)
    # a 1-token prompt (prefill fit) never costs more than a longer one
    assert _le(_attn(dev, engine, 1, c, n, hd, "prefill"), _attn(dev, engine, 1 + dq, c, n, hd, "prefill"))


@pytest.mark.slow
@pytest.mark.parametrize(("device", "engine"), CASES)
@SETTINGS
@given(c=st.integers(0, 60000), n=st.integers(1, 1024), dc=st.integers(1, 3000), dn=st.integers(1, 300))
def test_decode_attention_non_decreasing_in_work(device, engine, c, n, dc, dn):
    dev = load_device(device)
    for hd in HEADS[:3]:
        a = _attn(dev, engine, 1, c, n, hd)
        if a is None:
            return
        assert _le(a, _attn(dev, engine, 1, c + dc, n, hd)), (c, n, hd)
        assert _le(a, _attn(dev, engine, 1, c, n + dn, hd)), (c, n, hd)


MOE_SHAPES = [(8, 2, 1, 14336, 4096), (8, 2, 2, 7168, 4096), (128, 8, 8, 1536, 4096), (256, 8, 8, 2048, 7168)]


@pytest.mark.slow
@pytest.mark.parametrize(("device", "engine"), CASES)
@SETTINGS
@given(t=st.integers(1, 16384), dt=st.integers(1, 2000), shape=st.sampled_from(MOE_SHAPES))
def test_moe_experts_non_decreasing_in_tokens(device, engine, t, dt, shape):
    dev = load_device(device)
    e, k, ep, i, h = shape
    for fam in ("bf16", "fp8", "fp8_block", "mxfp4"):
        times = []
        for tok in (t, t + dt):
            pairs = busiest_rank_pairs(tok, k, e, ep)
            act = max(1.0, min(e / ep, active_experts(tok, k, e, ep)))
            times.append(engine_cost.moe_s(dev, engine, fam, pairs, act, i, h, tok * k))
        if times[0] is not None:
            assert _le(times[0][0], times[1][0]), (fam, t, t + dt, shape)


@pytest.mark.slow
@pytest.mark.parametrize(("device", "engine"), CASES)
@SETTINGS
@given(b=st.floats(1.0, 2e9), f=st.floats(1.0, 50.0), gpus=st.sampled_from([2, 4, 8]))
def test_all_reduce_non_decreasing_in_bytes(device, engine, b, f, gpus):
    dev = load_device(device)
    a = engine_cost.all_reduce_s(dev, engine, gpus, b, False)
    if a is not None:
        assert _le(a[0], engine_cost.all_reduce_s(dev, engine, gpus, b * f, False)[0])


def test_padded_rows_by_hand():
    # 8 experts with 3 rows each on a 16-row tile: 8 whole tiles; 8 experts with 100 rows: 800 + 8 * 8
    assert padded_rows(24, 8, 16) == 128 and padded_rows(800, 8, 16) == 864
    assert math.isclose(padded_rows(1, 0.5, 64), 64.0)  # at least one expert

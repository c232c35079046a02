import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcast.core.schedule import estimate_pipeline_runtime, fill_drain_latency, flow_shop_latency
from simcast.render.breakdown import format_breakdowns


def test_fill_drain_formula_by_hand():
    # sum 1+2+3 = 6, plus (4-1) * 3
    assert fill_drain_latency([1.0, 2.0, 3.0], 4) == pytest.approx(15.0)
    assert fill_drain_latency([2.0], 1) == 2.0
    with pytest.raises(ValueError):
        fill_drain_latency([1.0], 0)


def test_bubble_zero_at_one_microbatch():
    est = estimate_pipeline_runtime([[1.0, 2.0, 1.5]], [[0.1, 0.2, 0.1]], [])
    assert est.breakdown["bubble"] == 0.0
    assert est.latency_s == pytest.approx(4.9)


def test_breakdown_fields_and_bubble():
    est = estimate_pipeline_runtime([[1.0, 1.0]] * 3, [[0.5, 0.5]] * 3, [])
    assert est.stage_times_s == (1.5, 1.5)
    assert est.latency_s == pytest.approx(3.0 + 2 * 1.5)
    assert est.breakdown == pytest.approx({"compute": 2.0, "communication": 1.0, "bubble": 3.0})
    # classic bubble: (P-1)/(M+P-1) = 1/4
    assert est.idle_fraction == pytest.approx(0.25)


def test_idle_fraction_falls_as_microbatches_grow():
    fr = [estimate_pipeline_runtime([[1.0 / m] * 4] * m, [[0.0] * 4] * m, []).idle_fraction for m in (1, 2, 4, 8)]
    assert fr == sorted(fr, reverse=True) and fr[0] == pytest.approx(0.75)


def test_rfc_breakdown_line():
    line = format_breakdowns(
        {"Mem": 1.0, "Comm": 1.0, "Cube": 2.0, "Vec": 0.0}, {"compute": 3.0, "communication": 1.0, "bubble": 2.0}
    )
    assert line == "Mem 25.00 | Comm 25.00 | Cube 50.00 | Vec 0.00 | PP Compute 50.00 | PP Comm 16.67 | PP Bubble 33.33"
    assert format_breakdowns({"Mem": 1.0}, None) == "Mem 100.00 | Comm 0.00 | Cube 0.00 | Vec 0.00"


times = st.lists(st.floats(min_value=0.0, max_value=10.0, allow_nan=False), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(times, st.integers(min_value=1, max_value=16))
def test_flow_shop_equals_fill_drain_for_identical_microbatches(stage_times, m):
    assert flow_shop_latency([stage_times] * m) == pytest.approx(fill_drain_latency(stage_times, m), abs=1e-9)


@pytest.mark.slow  # ~1 s or more: out of make test-fast
@settings(max_examples=100, deadline=None)
@given(st.lists(times, min_size=1, max_size=6).filter(lambda r: len({len(x) for x in r}) == 1))
def test_bubble_never_negative(rows):
    est = estimate_pipeline_runtime(rows, [[0.0] * len(rows[0])] * len(rows), [])
    assert est.breakdown["bubble"] >= 0.0
    assert est.latency_s >= max(sum(r) for r in rows) - 1e-9

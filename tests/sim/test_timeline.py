"""The event-level timeline reproduces simulate's fill-drain estimate (the receiver pays each hop), the RFC's
blocking variant, and bounds the overlapped one."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcast.core.schedule import fill_drain_latency, flow_shop_latency
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.sim.simulate import simulate
from simcast.sim.timeline import report_timeline, schedule_pipeline

# Dyadic times (k / 1024 s): every sum is exact in float64, so "equal" means bit-equal.
dyadic = st.integers(min_value=0, max_value=4096).map(lambda k: k / 1024)
anyfloat = st.floats(min_value=0.0, max_value=10.0, allow_nan=False, allow_infinity=False)


@st.composite
def pipelines(draw, t=dyadic, identical=False):
    p = draw(st.integers(min_value=1, max_value=6))
    m = draw(st.integers(min_value=1, max_value=10))
    rows = draw(
        st.lists(
            st.tuples(st.lists(t, min_size=p, max_size=p), st.lists(t, min_size=p - 1, max_size=p - 1)),
            min_size=1 if identical else m,
            max_size=1 if identical else m,
        )
    )
    if identical:
        rows = rows * m
    return [list(c) for c, _ in rows], [list(s) for _, s in rows]


def receiver_stage_times(compute, send):
    """simulate's stage time per microbatch: compute + incoming one-way time (the receiver waits, the sender
    does not)."""
    return [[c[s] + ((0.0 + sd[s - 1]) if s else 0.0) for s in range(len(c))] for c, sd in zip(compute, send)]


def stage_times(compute, send):
    """The RFC's stage time per microbatch: compute + incoming + outgoing one-way times."""
    p = len(compute[0])
    return [
        [c[s] + ((0.0 + (sd[s - 1] if s else 0.0)) + (sd[s] if s < p - 1 else 0.0)) for s in range(p)]
        for c, sd in zip(compute, send)
    ]


MODES = ["receiver", "blocking", "overlap"]


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@settings(max_examples=300, deadline=None)
@given(pipelines(identical=True))
def test_receiver_equals_fill_drain_for_identical_microbatches(cs):
    compute, send = cs
    tl = schedule_pipeline(compute, send)  # default: the receiver pays, as simulate charges it
    assert tl.send_recv == "receiver"
    assert tl.makespan_s == fill_drain_latency(receiver_stage_times(compute, send)[0], len(compute))


@settings(max_examples=200, deadline=None)
@given(pipelines(t=anyfloat))
@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_receiver_equals_flow_shop_bitwise_for_any_floats(cs):
    compute, send = cs
    assert schedule_pipeline(compute, send).makespan_s == flow_shop_latency(receiver_stage_times(compute, send))


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@settings(max_examples=300, deadline=None)
@given(pipelines(identical=True))
def test_blocking_equals_fill_drain_for_identical_microbatches(cs):
    compute, send = cs
    tl = schedule_pipeline(compute, send, send_recv="blocking")
    assert tl.makespan_s == fill_drain_latency(stage_times(compute, send)[0], len(compute))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(pipelines())
def test_blocking_equals_flow_shop_exactly(cs):
    compute, send = cs
    assert schedule_pipeline(compute, send, send_recv="blocking").makespan_s == flow_shop_latency(
        stage_times(compute, send)
    )


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@settings(max_examples=200, deadline=None)
@given(pipelines(t=anyfloat))
def test_blocking_equals_flow_shop_bitwise_for_any_floats(cs):
    compute, send = cs
    assert schedule_pipeline(compute, send, send_recv="blocking").makespan_s == flow_shop_latency(
        stage_times(compute, send)
    )


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(pipelines(t=anyfloat), st.one_of(st.none(), st.integers(min_value=1, max_value=12)))
def test_overlap_le_receiver_le_blocking(cs, k):
    compute, send = cs
    span = {mode: schedule_pipeline(compute, send, send_recv=mode, max_in_flight=k).makespan_s for mode in MODES}
    assert span["overlap"] <= span["receiver"] * (1 + 1e-12) + 1e-12
    assert span["receiver"] <= span["blocking"] * (1 + 1e-12) + 1e-12


@settings(max_examples=200, deadline=None)
@given(pipelines(), st.sampled_from(MODES))
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_resources_never_double_booked_and_order_is_causal(cs, mode):
    compute, send = cs
    tl = schedule_pipeline(compute, send, send_recv=mode)
    by_res: dict[str, list] = {}
    for e in tl.events:
        assert e.end_s >= e.start_s
        if e.kind != "recv" or mode != "overlap":  # an overlapped recv is the same transfer as its send
            by_res.setdefault(e.resource, []).append(e)
    for evs in by_res.values():
        evs.sort(key=lambda e: (e.start_s, e.end_s))
        assert all(a.end_s <= b.start_s for a, b in zip(evs, evs[1:]))
    comp = {(e.microbatch, e.stage): e for e in tl.events if e.kind == "compute"}
    for (m, s), e in comp.items():
        if s:
            assert e.start_s >= comp[(m, s - 1)].end_s
    assert tl.makespan_s == max(e.end_s for e in comp.values())


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(pipelines(), st.sampled_from(MODES))
def test_in_flight_cap(cs, mode):
    compute, send = cs
    m = len(compute)
    free = schedule_pipeline(compute, send, send_recv=mode).makespan_s
    assert schedule_pipeline(compute, send, send_recv=mode, max_in_flight=m).makespan_s == free
    tl = schedule_pipeline(compute, send, send_recv=mode, max_in_flight=1)
    assert tl.makespan_s >= free
    # one microbatch in flight: microbatch m enters stage 0 only after m-1 left the last stage
    comp = {(e.microbatch, e.stage): e for e in tl.events if e.kind == "compute"}
    p = len(compute[0])
    for i in range(1, m):
        assert comp[(i, 0)].start_s >= comp[(i - 1, p - 1)].end_s


def test_by_hand_two_stages():
    # compute 3 s per stage, 1 s hop, M = 2.
    # receiver pays (default): stage times [3, 1 + 3]; fill-drain 3 + 4 + 4 = 11 s
    rv = schedule_pipeline([[3.0, 3.0]] * 2, [[1.0]] * 2)
    assert rv.makespan_s == 11.0
    kinds = [(e.kind, e.stage, e.microbatch, e.start_s, e.end_s, e.resource) for e in rv.events]
    assert kinds[:4] == [
        ("compute", 0, 0, 0.0, 3.0, "stage0"),
        ("send", 0, 0, 3.0, 4.0, "link0->1"),
        ("recv", 1, 0, 3.0, 4.0, "stage1"),
        ("compute", 1, 0, 4.0, 7.0, "stage1"),
    ]
    # stage 0 sent mb 1 at 6 s, but stage 1 posts its irecv only when free at 7 s: transfer 7-8, compute 8-11
    assert [(e.start_s, e.end_s) for e in rv.events if e.microbatch == 1 and e.stage == 1] == [(7.0, 8.0), (8.0, 11.0)]
    # RFC, blocking both sides: stage time 4 s each; 4 + 4 + 4 = 12 s
    tl = schedule_pipeline([[3.0, 3.0]] * 2, [[1.0]] * 2, send_recv="blocking")
    assert tl.makespan_s == 12.0
    kinds = [(e.kind, e.stage, e.microbatch, e.start_s, e.end_s) for e in tl.events]
    assert kinds[:4] == [
        ("compute", 0, 0, 0.0, 3.0),
        ("send", 0, 0, 3.0, 4.0),
        ("recv", 1, 0, 4.0, 5.0),
        ("compute", 1, 0, 5.0, 8.0),
    ]
    # overlapped: 3 + 1 + 3, then mb 1 arrives at 7 and stage 1 is free at 7 → 10 s
    ov = schedule_pipeline([[3.0, 3.0]] * 2, [[1.0]] * 2, send_recv="overlap")
    assert ov.makespan_s == 10.0
    assert ov.idle_fraction == pytest.approx(1 - 12 / 20)


def test_bad_inputs():
    with pytest.raises(ValueError):
        schedule_pipeline([], [])
    with pytest.raises(ValueError):
        schedule_pipeline([[1.0, 1.0]], [[]])
    with pytest.raises(ValueError):
        schedule_pipeline([[1.0]], [[]], max_in_flight=0)
    with pytest.raises(ValueError):
        schedule_pipeline([[-1.0]], [[]])
    with pytest.raises(ValueError):
        schedule_pipeline([[1.0]], [[]], send_recv="sideways")


@pytest.mark.parametrize(
    "batch,m", [(Batch.prefill(4, 128), 4), (Batch.prefill(3, 100), 2), (Batch.prefill(1, 300), 3)]
)
def test_report_timeline_matches_report_latency(qwen06b, h100, batch, m):
    r = simulate(
        SimSpec(model=qwen06b, device=h100, parallel=ParallelSpec(tp=1, pp=4), batch=batch, num_microbatches=m)
    )
    tl = report_timeline(r)
    assert tl.makespan_s == pytest.approx(r.latency_s, rel=1e-12)
    assert tl.idle_fraction == pytest.approx(r.runtime.idle_fraction, rel=1e-9, abs=1e-12)
    assert report_timeline(r, send_recv="overlap").makespan_s <= tl.makespan_s
    assert report_timeline(r, send_recv="blocking").makespan_s >= tl.makespan_s
    for s, stage in enumerate(r.stages):  # busy time per microbatch = the report's mean stage time
        assert tl.stage_busy_s(s) / len(r.microbatches) == pytest.approx(stage.stage_s, rel=1e-9)

"""One pipeline-timing formula: the one-step schedule, the event timeline and the serving step all time
microbatches through the stages with :func:`simcast.core.schedule.pipeline_times`.

The example: 3 stages, 4 microbatches; compute ``[2, 2, 1]`` s for microbatches 0-2 and ``[1, 1, 1]`` s for
the smaller last one; hop 0->1 takes 1 s, hop 1->2 0 s. The receiver waits for its incoming hop, so the stages
are held ``[2, 3, 1]`` (microbatches 0-2) and ``[1, 2, 1]`` (microbatch 3). By hand, ``end = max(end of the
previous microbatch on this stage, end of this microbatch on the previous stage) + busy``:

    stage 0: 2, 4, 6, 7
    stage 1: max(0, 2) + 3 = 5, max(5, 4) + 3 = 8, max(8, 6) + 3 = 11, max(11, 7) + 2 = 13
    stage 2: max(0, 5) + 1 = 6, max(6, 8) + 1 = 9, max(9, 11) + 1 = 12, max(12, 13) + 1 = 14

so one step takes 14 s. In the serving loop the 4 microbatches circulate (at most 4 in flight: microbatch
``m + 4`` is microbatch ``m``'s next step and enters once ``m`` has left). Second round by hand:

    stage 0: max(7, 6) + 2 = 9, max(9, 9) + 2 = 11, max(11, 12) + 2 = 14, max(14, 14) + 1 = 15
    stage 1: max(13, 9) + 3 = 16, max(16, 11) + 3 = 19, max(19, 14) + 3 = 22, max(22, 15) + 2 = 24
    stage 2: max(14, 16) + 1 = 17, 20, 23, 25

each microbatch comes back 11 s after its previous step (17 - 6, 20 - 9, 23 - 12, 25 - 14): stage 1's
3 + 3 + 3 + 2, the serving step's period. Four equal microbatches ``[2, 3, 1]``: ends 6, 9, 12, 15 and
then 18, 21, 24, 27, every 12 s = max(Σ t = 6, 4 · max t = 12), the serving step's cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from simcast.core import schedule
from simcast.serving import step
from simcast.sim import timeline

COMPUTE = [[2.0, 2.0, 1.0]] * 3 + [[1.0, 1.0, 1.0]]
SEND = [[1.0, 0.0]] * 4
BUSY = [[2.0, 3.0, 1.0]] * 3 + [[1.0, 2.0, 1.0]]


@pytest.fixture
def spies(monkeypatch):
    """Every caller's ``pipeline_times`` replaced by one recording wrapper of the real one."""
    real = schedule.pipeline_times
    calls: list[str] = []
    for mod in (schedule, timeline, step):
        assert mod.pipeline_times is real  # the callers import the one function, not a copy

        def spy(busy, max_in_flight=None, _name=mod.__name__):
            calls.append(_name)
            return real(busy, max_in_flight)

        monkeypatch.setattr(mod, "pipeline_times", spy)
    return calls


def test_one_step_schedule_and_timeline_agree_by_hand(spies):
    est = schedule.estimate_pipeline_runtime(COMPUTE, [[0.0, 1.0, 0.0]] * 4, [])
    assert est.latency_s == 14.0
    assert "simcast.core.schedule" in spies
    tl = timeline.schedule_pipeline(COMPUTE, SEND)
    assert tl.makespan_s == 14.0
    assert "simcast.sim.timeline" in spies
    ends = [
        max(e.end_s for e in tl.events if e.stage == s and e.kind == "compute" and e.microbatch == 3) for s in (0, 1, 2)
    ]
    assert ends == [7.0, 13.0, 14.0]


def test_serving_step_period_is_the_circulating_pipeline(spies):
    times = schedule.pipeline_times(BUSY * 2, max_in_flight=4)
    last = [row[-1] for row in times.end_s]
    assert last == [6.0, 9.0, 12.0, 14.0, 17.0, 20.0, 23.0, 25.0]
    period = step.microbatch_period_s([tuple(r) for r in BUSY], [0.0] * 4, False)
    assert period == 11.0 == last[4] - last[0] == last[7] - last[3]
    assert "simcast.serving.step" in spies
    equal = [row[-1] for row in schedule.pipeline_times([[2.0, 3.0, 1.0]] * 8, max_in_flight=4).end_s]
    assert equal == [6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 24.0, 27.0]
    spies.clear()
    assert step.step_cycle_s((2.0, 3.0, 1.0), 0.0, 4, False) == 12.0 == equal[4] - equal[0]
    assert spies == ["simcast.serving.step"]


def test_fill_drain_is_the_closed_form_for_equal_microbatches():
    assert schedule.fill_drain_latency([2.0, 3.0, 1.0], 4) == 6.0 + 3 * 3.0 == 15.0
    assert schedule.pipeline_times([[2.0, 3.0, 1.0]] * 4).makespan_s == 15.0


@pytest.mark.slow
def test_no_other_module_defines_a_pipeline_recurrence():
    """No function outside core/schedule.py keeps per-stage "free at" times (the recurrence's state)."""
    pkg = Path(schedule.__file__).resolve().parents[1]
    found = []
    for f in pkg.rglob("*.py"):
        if f.name == "schedule.py" and f.parent.name == "core":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Name) and node.id in ("stage_free", "link_free", "left_pipeline"):
                found.append(f"{f.relative_to(pkg)}:{node.lineno}")
    assert not found

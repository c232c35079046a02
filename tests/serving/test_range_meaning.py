"""``--random-range-ratio-meaning``: the symmetric range vllm bench serve draws (L(1-r)..L(1+r)) and the older
lower-bound one (rL..L, SGLang bench_serving's ``np.random.randint(max(int(L*r), 1), L + 1)``)."""

from __future__ import annotations

from simcast.core.lengths import length_range
from simcast.serving.request_level.request_gen import make_requests


def test_ranges_by_hand():
    # symmetric, L = 1000, r = 0.8: floor(1000 * 0.2) .. ceil(1800) inclusive; 1 - 0.8 is 0.19999999999999996
    # in binary floating point, so the floor is 199, as vLLM's own math.floor(L * (1 - r)) gives
    assert length_range(1000, 0.8, "symmetric") == (199, 1801)
    # lower-bound, L = 1000, r = 0.8: 800 .. 1000 inclusive; r = 0: 1 .. L
    assert length_range(1000, 0.8, "lower-bound") == (800, 1001)
    assert length_range(1000, 0.0, "lower-bound") == (1, 1001)


def test_lower_bound_lengths_stay_within_r_l_and_l():
    reqs = make_requests(
        num_prompts=400,
        rate=float("inf"),
        input_len=1024,
        output_len=1024,
        range_ratio=0.8,
        range_meaning="lower-bound",
    )
    ins = [r.input_len for r in reqs]
    outs = [r.output_len for r in reqs]
    assert min(ins) >= 819 and max(ins) <= 1024 and min(outs) >= 819 and max(outs) <= 1024
    # mean of uniform 819..1024 = 921.5 (400 draws: within a few tokens)
    assert abs(sum(outs) / len(outs) - 921.5) < 10

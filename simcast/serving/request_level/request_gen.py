"""The requests of a simulated benchmark (pure; no I/O): ``vllm bench serve``'s random dataset and arrival
process, a shipped length distribution, a trace's rows, multi-turn conversations, and shared prefixes
(:class:`simcast.serving.request_level.scheduler.RequestSpec` carries them abstractly: a prefix id and length, or the
request a conversation turn continues)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from simcast.core.errors import require
from simcast.core.lengths import LengthDistribution, length_range
from simcast.serving.request_level.scheduler import RequestSpec


def make_requests(
    *,
    num_prompts: int,
    rate: float,
    input_len: int = 1024,
    output_len: int = 128,
    range_ratio: float = 0.0,
    burstiness: float = 1.0,
    seed: int = 0,
    lengths: LengthDistribution | None = None,
    prefix_len: int = 0,
    range_meaning: str = "symmetric",
) -> list[RequestSpec]:
    """vLLM's random dataset and arrival process: lengths uniform on
    ``[floor(L(1-r)), ceil(L(1+r))]`` (output at least 1); with ``range_meaning`` ``"lower-bound"`` the older
    meaning, uniform on ``[max(1, int(L r)), L]`` (SGLang ``bench_serving.py`` ``sample_random_requests``:
    ``np.random.randint(max(int(input_len * range_ratio), 1), input_len + 1)``, and vLLM's
    ``benchmark_serving.py`` before the symmetric range); gaps ~ Gamma(burstiness, 1/(rate·burstiness)),
    rescaled so the last arrival is at ``N/rate`` (``vllm/benchmarks/serve.py``); rate inf: all at 0.
    ``prefix_len`` (``--random-prefix-len``): every prompt starts with the same ``prefix_len`` tokens, then
    its own random input length, so a prompt has ``prefix_len + input`` tokens (the range ratio applies to
    the random part only: ``vllm/benchmarks/datasets.py`` RandomDataset, ``prefix_token_ids + inner_seq``).

    With ``lengths`` (a dataset's distribution: ``--dataset-name sharegpt`` ...) each request's
    (input, output) pair is drawn from it instead, i.i.d.; the arrivals are the same process.
    One generator seeded with ``seed`` draws the lengths, then the gaps.
    """
    require(num_prompts >= 1, "--num-prompts", num_prompts, "must be >= 1")
    require(0 <= range_ratio < 1, "--random-range-ratio", range_ratio, "must be in [0, 1)")
    rng = np.random.default_rng(seed)
    if lengths is not None:
        ins, outs = lengths.sample(num_prompts, rng)
    else:
        ins = rng.integers(*length_range(input_len, range_ratio, range_meaning), size=num_prompts)
        outs = rng.integers(*length_range(output_len, range_ratio, range_meaning), size=num_prompts)
    arr = _arrivals(rng, num_prompts, rate, burstiness)
    pid = 0 if prefix_len else -1
    return [
        RequestSpec(
            arrival_s=float(a), input_len=prefix_len + int(i), output_len=int(o), prefix_id=pid, prefix_len=prefix_len
        )
        for a, i, o in zip(arr, ins, outs)
    ]


def make_conversations(
    *,
    num_prompts: int,
    rate: float,
    turns: int,
    input_len: int = 1024,
    output_len: int = 128,
    range_ratio: float = 0.0,
    burstiness: float = 1.0,
    seed: int = 0,
) -> list[RequestSpec]:
    """Multi-turn conversations (``--dataset-name multiturn``): ``ceil(N / turns)`` conversations of
    ``turns`` turns (the last one shorter when ``turns`` does not divide ``N``); each turn's new user message
    and answer have lengths uniform as :func:`make_requests` draws them; a turn's prompt is the whole history
    (every earlier message and answer) + its new message, sent when the previous answer has arrived (a closed
    loop, no think time); first turns arrive as :func:`make_requests`' arrivals."""
    require(num_prompts >= 1, "--num-prompts", num_prompts, "must be >= 1")
    require(turns >= 1, "--multiturn-turns", turns, "must be >= 1")
    require(0 <= range_ratio < 1, "--random-range-ratio", range_ratio, "must be in [0, 1)")
    rng = np.random.default_rng(seed)
    msg = rng.integers(
        max(1, math.floor(input_len * (1 - range_ratio))), math.ceil(input_len * (1 + range_ratio)) + 1, num_prompts
    )
    ans = rng.integers(
        max(1, math.floor(output_len * (1 - range_ratio))), math.ceil(output_len * (1 + range_ratio)) + 1, num_prompts
    )
    starts = _arrivals(rng, -(-num_prompts // turns), rate, burstiness)
    out: list[RequestSpec] = []
    history = 0
    for i in range(num_prompts):
        k = i % turns
        history = 0 if k == 0 else history + int(msg[i - 1]) + int(ans[i - 1])
        out.append(
            RequestSpec(
                arrival_s=float(starts[i // turns]),
                input_len=history + int(msg[i]),
                output_len=int(ans[i]),
                parent=i - 1 if k else -1,
                prefix_len=history,
            )
        )
    return out


def requests_from_lengths(
    input_lens: Sequence[int],
    output_lens: Sequence[int],
    *,
    num_prompts: int,
    rate: float,
    burstiness: float = 1.0,
    seed: int = 0,
    prefix_ids: Sequence[int] | None = None,
    prefix_lens: Sequence[int] | None = None,
) -> list[RequestSpec]:
    """Requests whose lengths (and shared prefixes, when given) are a trace's rows in order (a
    ``--dataset-path`` file without arrival times):
    the first ``num_prompts`` rows, and when the trace has fewer, the rest drawn from its rows uniformly with
    replacement (as ``vllm bench serve`` oversamples a short dataset); arrivals as :func:`make_requests`."""
    require(num_prompts >= 1, "--num-prompts", num_prompts, "must be >= 1")
    require(len(input_lens) == len(output_lens) and len(input_lens) > 0, "trace", len(input_lens), "needs rows")
    rng = np.random.default_rng(seed)
    k = np.arange(min(num_prompts, len(input_lens)))
    if num_prompts > len(k):
        k = np.concatenate((k, rng.integers(0, len(input_lens), size=num_prompts - len(k))))
    ins, outs = np.asarray(input_lens)[k], np.asarray(output_lens)[k]
    pids = np.asarray(prefix_ids)[k] if prefix_ids is not None else np.full(len(k), -1)
    plens = np.asarray(prefix_lens)[k] if prefix_lens is not None else np.zeros(len(k), dtype=np.int64)
    arr = _arrivals(rng, num_prompts, rate, burstiness)
    return [
        RequestSpec(arrival_s=float(a), input_len=int(i), output_len=int(o), prefix_id=int(p), prefix_len=int(n))
        for a, i, o, p, n in zip(arr, ins, outs, pids, plens)
    ]


def _arrivals(rng: np.random.Generator, n: int, rate: float, burstiness: float) -> np.ndarray:
    """Send times (s) of ``n`` requests: gamma gaps rescaled to end at ``n/rate``, first at 0; rate inf: all 0."""
    require(burstiness > 0, "--burstiness", burstiness, "must be > 0")
    require(rate > 0, "--request-rate", rate, "must be > 0 or inf")
    if math.isinf(rate):
        return np.zeros(n)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    arr = np.cumsum(gaps)
    arr = arr * (n / rate) / arr[-1]
    return np.concatenate(([0.0], arr[:-1]))  # first request at t = 0

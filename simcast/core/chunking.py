"""One prompt's prefill chunks, and how each engine pipelines them through the PP stages.

Pure: no costing here; :func:`chunk_plan` takes the step-time model as ``cost_of``.

**Chunk sizes.** Static: chunks of ``chunk_size`` tokens, the last one the remainder
(vLLM ``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``). Dynamic: SGLang's
``--enable-dynamic-chunking`` (python/sglang/srt/managers/scheduler_pp_mixin.py
``profile_and_init_predictor`` / ``ChunkSizePredictor`` @00ff98d3, unchanged in
scheduler_components/dynamic_chunk_sizer.py @15746b5e):

1. profile: PP rank 0 times fresh prefills (no cached prefix) of ``int(1.25·C − i·(1.25·C // 128))``
   tokens, ``i = 0..127`` (``C`` = ``--chunked-prefill-size``); the first sample is dropped (no warm-up);
2. fit ``f(l) = a·l² + b·l + c`` (least squares) to those times; ``a <= 0`` is an error (the server
   refuses to start), ``b < 0`` is set to 0;
3. target ``T = f(C) − f(0)``: the first chunk's time;
4. the next chunk after ``L`` prefilled tokens solves ``f(L + x) − f(L) = T`` (the positive root of
   ``a·x² + (2aL + b)·x − T = 0``): its time equals the first chunk's;
5. smoothed toward ``C``: ``C + s·(x − C)``, ``s`` = ``SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR``
   (default 0.75, python/sglang/srt/environ.py @21ff4b08); floored at ``C // 4``;
6. aligned down to ``max(page_size, 64)`` (at least one alignment unit); capped at
   ``context_len − L − 100`` and ``max_prefill_tokens`` (16384 by default,
   python/sglang/srt/server_args.py @469c63e5), aligned again; below one unit the prediction is
   dropped and the static ``C`` used. The scheduler asks for it whenever a chunked request
   continues (scheduler.py ``_get_new_batch_prefill_raw``: ``history_len =
   len(chunked_req.prefix_indices)``, the tokens already scheduled); the first chunk is ``C``.

**Pipelining one prompt.** See :data:`RULES`: SGLang and vLLM schedule chunk ``k + 1`` while chunk
``k`` is still on later stages; the engine's batch queue caps the microbatches in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simcast.core.errors import require

SGLANG_SMOOTH_FACTOR = 0.75
"""SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR default (python/sglang/srt/environ.py @21ff4b08)."""
SGLANG_PROFILE_SAMPLES = 128
SGLANG_PROFILE_SPAN = 1.25
"""Profiled lengths run from 1.25·C down in 128 steps (scheduler_pp_mixin.py @00ff98d3)."""
SGLANG_MIN_ALIGNMENT = 64
SGLANG_CONTEXT_MARGIN = 100
SGLANG_MAX_PREFILL_TOKENS = 16384
"""``--max-prefill-tokens`` default (server_args.py @469c63e5): the cap of a dynamic chunk."""


@dataclass(frozen=True, kw_only=True)
class QuadraticLatency:
    """``f(l) = a·l² + b·l + c`` seconds for a fresh prefill of ``l`` tokens (SGLang's predictor model)."""

    a: float
    b: float
    c: float

    def __call__(self, tokens: float) -> float:
        return self.a * tokens * tokens + self.b * tokens + self.c


def sglang_profile_lengths(chunk_size: int) -> tuple[int, ...]:
    """The prompt lengths SGLang's dynamic chunking profiles for ``--chunked-prefill-size chunk_size``."""
    top = chunk_size * SGLANG_PROFILE_SPAN
    step = top // SGLANG_PROFILE_SAMPLES
    out = []
    for i in range(SGLANG_PROFILE_SAMPLES):
        n = int(top - i * step)
        if n <= 0:
            break
        out.append(n)
    return tuple(out)


def fit_quadratic(lengths: Sequence[int], seconds: Sequence[float]) -> QuadraticLatency:
    """Least-squares ``f(l) = a·l² + b·l + c`` (normal equations on ``l`` scaled to ~1, for conditioning)."""
    require(len(lengths) == len(seconds) and len(set(lengths)) >= 3, "fit", len(lengths), "needs >= 3 lengths")
    s = float(max(lengths))
    rows = [(1.0, x / s, (x / s) ** 2) for x in lengths]
    m = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    v = [sum(r[i] * t for r, t in zip(rows, seconds)) for i in range(3)]
    for col in range(3):  # Gauss-Jordan with partial pivoting on the 3x3 system
        piv = max(range(col, 3), key=lambda r: abs(m[r][col]))
        m[col], m[piv], v[col], v[piv] = m[piv], m[col], v[piv], v[col]
        for r in range(3):
            if r != col and m[col][col]:
                k = m[r][col] / m[col][col]
                m[r] = [x - k * y for x, y in zip(m[r], m[col])]
                v[r] -= k * v[col]
    c0, c1, c2 = (v[i] / m[i][i] for i in range(3))
    return QuadraticLatency(a=c2 / (s * s), b=c1 / s, c=c0)


def sglang_fit(chunk_size: int, cost_of: Callable[[int, int], float]) -> QuadraticLatency:
    """SGLang's profile and fit: ``cost_of(0, l)`` seconds at the profiled lengths, first sample dropped.

    Raises :class:`~simcast.core.errors.SimcastInputError` when ``a <= 0`` (SGLang refuses to start);
    a negative ``b`` is set to 0, as SGLang does.
    """
    lengths = sglang_profile_lengths(chunk_size)[1:]
    f = fit_quadratic(lengths, [cost_of(0, n) for n in lengths])
    require(
        f.a > 0,
        "--enable-dynamic-chunking",
        f"a={f.a:.3g}",
        "the quadratic fit of prefill time over length must have a > 0 (SGLang refuses to start otherwise)",
    )
    return QuadraticLatency(a=f.a, b=max(f.b, 0.0), c=f.c)


def sglang_next_chunk(
    history_tokens: int,
    chunk_size: int,
    fit: QuadraticLatency,
    *,
    smooth_factor: float = SGLANG_SMOOTH_FACTOR,
    page_size: int = 1,
    context_len: int | None = None,
    max_chunk_tokens: int | None = SGLANG_MAX_PREFILL_TOKENS,
) -> int | None:
    """SGLang's ``predict_next_chunk_size``: the next chunk after ``history_tokens``, or None (use ``chunk_size``)."""
    target = fit(float(chunk_size)) - fit(0.0)
    if fit.a <= 0 or target <= 0:
        return None
    b = 2 * fit.a * history_tokens + fit.b
    disc = b * b + 4 * fit.a * target
    x = (-b + math.sqrt(disc)) / (2 * fit.a)
    if x <= 0:
        return None
    size = max(int(chunk_size + smooth_factor * (x - chunk_size)), chunk_size // 4)
    unit = max(page_size, SGLANG_MIN_ALIGNMENT)
    size = max(size // unit * unit, unit)
    cap = None if context_len is None else context_len - history_tokens - SGLANG_CONTEXT_MARGIN
    if max_chunk_tokens is not None:
        cap = max_chunk_tokens if cap is None else min(cap, max_chunk_tokens)
    if cap is not None:
        size = min(size, cap)
    size = size // unit * unit
    return size if size >= unit else None


def chunk_plan(
    prompt_tokens: int,
    chunk_size: int,
    *,
    dynamic: bool = False,
    smooth_factor: float = SGLANG_SMOOTH_FACTOR,
    page_size: int = 1,
    cost_of: Callable[[int, int], float] | None = None,
    context_len: int | None = None,
    max_chunk_tokens: int | None = SGLANG_MAX_PREFILL_TOKENS,
) -> tuple[int, ...]:
    """Chunk sizes (tokens) of one prompt's prefill; they sum to ``prompt_tokens``.

    Static: ``chunk_size`` each, the last one the remainder. ``dynamic``: SGLang's rule (module
    docstring), with ``cost_of(prefix_tokens, new_tokens) -> seconds`` as the profiled step time
    (called with prefix 0 only, as SGLang profiles fresh prefills).
    """
    require(prompt_tokens >= 1, "prompt_tokens", prompt_tokens, "must be >= 1")
    require(chunk_size >= 1, "--chunked-prefill-size", chunk_size, "must be >= 1")
    require(0 <= smooth_factor <= 1, "--dynamic-chunking-smooth-factor", smooth_factor, "must be in [0, 1]")
    require(page_size >= 1, "page_size", page_size, "must be >= 1")
    if not dynamic:
        full, rest = divmod(prompt_tokens, chunk_size)
        return (chunk_size,) * full + ((rest,) if rest else ())
    require(cost_of is not None, "--enable-dynamic-chunking", None, "needs a step-time model (cost_of)")
    assert cost_of is not None
    fit = sglang_fit(chunk_size, cost_of)
    out = [min(chunk_size, prompt_tokens)]
    done = out[0]
    while done < prompt_tokens:
        nxt = sglang_next_chunk(
            done,
            chunk_size,
            fit,
            smooth_factor=smooth_factor,
            page_size=page_size,
            context_len=context_len,
            max_chunk_tokens=max_chunk_tokens,
        )
        out.append(min(nxt or chunk_size, prompt_tokens - done))
        done += out[-1]
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class PipelinePrefillRule:
    """How an engine runs one prompt's chunks under PP (each engine module's ``pp_prefill_rule``,
    :data:`simcast.engines.PP_PREFILL_RULES`).

    ``overlap``: chunk ``k + 1`` may start on stage 0 while chunk ``k`` is on later stages (the
    receiver-paid send/recv as for any microbatch); else it waits until chunk ``k`` has left the last
    stage. ``chunked_by_default``: the engine chunks a long prompt without being asked. ``source``:
    file @ commit the rule was read from.
    """

    engine: str
    overlap: bool
    chunked_by_default: bool
    cite: str  # file @ commit
    source: str  # what the code does, for a reader checking the rule

    def max_in_flight(self, pp: int) -> int:
        """Microbatches in the pipeline at once for ``pp`` stages (the engine's batch queue)."""
        return pp if self.overlap else 1


@dataclass(frozen=True, kw_only=True)
class ChunkedPrefill:
    """One prompt's prefill as chunks flowing through the stages as microbatches.

    ``tokens``: chunk sizes; chunk ``k`` attends to the ``sum(tokens[:k])`` tokens before it.
    ``max_in_flight``: chunks inside the pipeline at once (None: no cap). ``engine_rule``: the engine whose
    :data:`simcast.engines.PP_PREFILL_RULES` entry sets the overlap ("" none: chunks overlap, no cap).
    ``note``: what chose the chunks (the caller's words, for the report's assumption record).
    """

    tokens: tuple[int, ...]
    max_in_flight: int | None = None
    engine_rule: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", tuple(self.tokens))
        require(len(self.tokens) >= 1, "chunks", len(self.tokens), "needs >= 1 chunk")
        require(all(isinstance(t, int) and t >= 1 for t in self.tokens), "chunk", min(self.tokens), "must be >= 1")
        require(
            self.max_in_flight is None or self.max_in_flight >= 1,
            "max_in_flight",
            self.max_in_flight,
            "must be >= 1 or None",
        )

    @property
    def prefix_tokens(self) -> tuple[int, ...]:
        """Tokens before each chunk (its attention context)."""
        out, done = [], 0
        for t in self.tokens:
            out.append(done)
            done += t
        return tuple(out)


def chunk_runs(tokens: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Chunk sizes run-length encoded: ``(size, how many in a row)``; ``8192 x15, 8000`` in words."""
    runs: list[list[int]] = []
    for t in tokens:
        if runs and runs[-1][0] == t:
            runs[-1][1] += 1
        else:
            runs.append([t, 1])
    return tuple((t, n) for t, n in runs)

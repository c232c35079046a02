"""The engine settings that change when a request is taken in and when the client sees its tokens, as the
request-level loop applies them (each engine's values: its module, :mod:`simcast.engines.flags`).

* **Receiving every n decode steps** (SGLang ``--scheduler-recv-interval``, and
  ``--num-continuous-decode-steps``, whose back-to-back decode steps do not look at the queue either): the
  scheduler adds 1 to a counter after a decode step and the interval after any other step (its
  ``SchedulerRecvSkipper`` weights: decode 1, others 1000), and takes in new requests when the counter reaches
  the interval; an idle engine takes them in at once (its idle loop counts 1 per pass and spins).
* **Batch waiting** (TensorRT-LLM ``batch_wait_timeout_iters`` / ``batch_wait_max_tokens_ratio``,
  ``PyExecutor._waiting_requests``): new prompts are held back while the scheduled tokens (waiting prompts +
  one per running decode) stay below the ratio x the step's token budget, for at most the iteration limit;
  with nothing running simcast does not hold them (an assumption: the engine's empty iterations are short).
* **Streaming in chunks** (SGLang ``--stream-interval`` n, ``stream_output_generation``): a request's k-th
  token is sent when k mod n is 1 (so the first at once) and at its end; each client-side inter-token gap is
  the time between two sends.
"""

from __future__ import annotations

from simcast.engines.policy import EnginePolicy
from simcast.serving.request_level.scheduler import Replica, Req

OTHER_STEP_WEIGHT = 1000
"""SGLang's ``SchedulerRecvSkipper`` weight of a step that is not a decode (_DEFAULT_WEIGHT)."""


def receive_cutoff(rep: Replica, pol: EnginePolicy, cutoff_s: float) -> float:
    """The latest arrival time the scheduler of ``rep`` has taken in when it forms the next step (``cutoff_s``
    without a receive interval)."""
    n = pol.receive_every
    if n <= 1:
        return cutoff_s
    if not rep.running:
        rep.recv_count, rep.recv_s = 0, cutoff_s
        return cutoff_s
    rep.recv_count += 1 if rep.decode_only else OTHER_STEP_WEIGHT
    if rep.recv_count >= n:
        rep.recv_count, rep.recv_s = 0, cutoff_s
    return min(cutoff_s, rep.recv_s)


def hold_prompts(rep: Replica, pol: EnginePolicy, cutoff_s: float, budget: int) -> bool:
    """Whether new prompts wait this step (batch waiting; False when the engine does not wait)."""
    iters, ratio = pol.batch_wait
    if not iters or not rep.running:
        return False
    tokens = sum(q.prefill_left for q in rep.waiting if q.ready_s <= cutoff_s) + len(rep.running)
    if tokens < ratio * budget and rep.wait_count < iters:
        rep.wait_count += 1
        return True
    rep.wait_count = 0
    return False


def stream_gaps(q: Req, before: int, now_s: float, every: int) -> float | None:
    """The client-side gap ending at ``now_s`` when ``q``'s tokens ``before`` + 1 .. ``q.generated`` include
    one the engine sends (streaming every ``every`` tokens); None when none is sent."""
    done = q.generated >= q.spec.output_len
    if not done and (q.generated - 1) // every == (before - 1) // every:
        return None
    gap = now_s - q.sent_token_s
    q.sent_token_s = now_s
    return gap

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
* **Streaming in chunks** (SGLang ``--stream-interval`` n: a request's k-th token is sent when k mod n is 1;
  TensorRT-LLM ``stream_interval`` n: at its k-th decoding iteration when k mod n is 0, the prefill's being
  the first; each engine's ``stream_sends``): the first token is sent at once and the last at the end; each
  client-side inter-token gap is the time between two sends.
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


def stream_gaps(q: Req, got: int, now_s: float, pol: EnginePolicy, every: int) -> float | None:
    """The client-side gap ending at ``now_s`` when the decoding step that gave ``q`` its latest ``got`` tokens
    (its ``q.decode_steps``-th) sends them (streaming every ``every`` of the engine's count, tokens or decoding
    iterations); None when the engine holds them back."""
    done = q.generated >= q.spec.output_len
    if pol.engine.stream_counts == "iterations":  # the prefill's iteration is the first
        before, after = q.decode_steps, q.decode_steps + 1
    else:
        before, after = q.generated - got, q.generated
    if not done and not pol.engine.stream_sends(before, after, every):
        return None
    gap = now_s - q.sent_token_s
    q.sent_token_s = now_s
    return gap

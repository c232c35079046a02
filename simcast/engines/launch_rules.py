"""An engine's argument rules on a server command line, as data (:class:`Rule`; each engine module lists its
own in ``launch_rules``), and :func:`check_launch` that checks an emitted command against them (pure: no I/O).

Every rule cites where the engine enforces it; ``optimize --emit`` checks each line it prints, and a
line that breaks a rule is a bug in simcast (tests/render/test_launch.py has one test per rule).

Sources (the rules themselves: :mod:`simcast.engines.vllm`, :mod:`simcast.engines.sglang`):

* SGLang ``python/sglang/srt/server_args.py`` (``ServerArgs._handle_data_parallelism``: ``dp_size == 1``
  switches ``enable_dp_attention`` off, then ``assert self.tp_size % self.dp_size == 0``; the launch
  flags ``--nnodes``, ``--node-rank``, ``--dist-init-addr``) and
  ``python/sglang/srt/distributed/parallel_state.py`` (``initialize_model_parallel``:
  ``moe_tp_size = tp_size // moe_ep_size // moe_dp_size``, so ``ep_size * moe_dp_size`` must divide
  ``tp_size``); with DP attention ``--tp-size`` counts every GPU of a stage (attention TP is
  ``tp_size / dp_size``). Read at sgl-project/sglang@001067f (server_args.py) and the
  ``_handle_data_parallelism`` of earlier stored copies, which is unchanged in substance.
* vLLM ``docs/serving/data_parallel_deployment.md`` (v0.12.0, https://docs.vllm.ai/en/v0.12.0/serving/
  data_parallel_deployment/): multi-node DP runs ``vllm serve`` on every node with
  ``--data-parallel-size``, ``--data-parallel-size-local`` (ranks on this node) and
  ``--data-parallel-address``/``--data-parallel-rpc-port`` of the head; the other nodes add ``--headless``
  and ``--data-parallel-start-rank`` (``-dpr``); ``--enable-expert-parallel`` on all nodes makes the
  MoE layers one EP group of DP x TP ranks (else one TP group of that size);
  ``examples/online_serving/multi_instance_data_parallel.py`` (v0.9.1) for ``--headless`` with ``-dpr``.
  A replica larger than a node runs on Ray (``docs/serving/distributed_serving.md``:
  ``--distributed-executor-backend ray`` on the head after ``ray start``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Flags = dict[str, str | None]
"""A parsed command line: ``--flag`` -> its value (None for a switch)."""


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One argument rule of an engine (listed in its module's ``launch_rules``): ``ok(flags)`` is False when
    ``flags`` break it."""

    name: str
    says: str  # the rule in words (the message when broken)
    source: str  # file@version and the function that enforces it
    ok: Callable[[Flags], bool]


def parse_flags(argv: list[str]) -> Flags:
    """``--flag value`` / ``--flag`` pairs of a command line (positional words skipped)."""
    out: Flags = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is not None and not nxt.startswith("--"):
                out[a] = nxt
                i += 2
                continue
            out[a] = None
        i += 1
    return out


def flag_int(f: Flags, flag: str, default: int = 1) -> int:
    v = f.get(flag)
    try:
        return int(v) if v is not None else default
    except ValueError:
        return -1  # not an integer: every size rule fails on it


def check_launch(rules: tuple[Rule, ...], argv: list[str]) -> list[str]:
    """The ``rules`` (one engine's) that the server command ``argv`` breaks, one message each (empty: none)."""
    f = parse_flags(argv)
    return [f"{r.name}: {r.says} [{r.source}]" for r in rules if not r.ok(f)]

"""Launch commands for a chosen layout (``simcast optimize --emit vllm|sglang``; pure text, no I/O).

For each ranked layout: the engine's server command(s) with the layout and the limits simcast
assumed (one per node when the layout spans nodes; built by the engine's module,
:meth:`simcast.engines.base.Engine.server_lines`, with the flag names from its own argument parser),
each checked against the engine's argument rules (its ``launch_rules``,
:mod:`simcast.engines.launch_rules`), and a ``vllm bench serve`` line whose workload is the one the
prediction is for:

* ``vllm bench serve`` (``vllm/benchmarks/serve.py`` @def9ce8): ``--dataset-name random``,
  ``--random-input-len``, ``--random-output-len``, ``--random-range-ratio`` (lengths uniform in
  L(1-r)..L(1+r)), ``--ignore-eos``, ``--num-prompts``, ``--max-concurrency``, ``--request-rate``,
  ``--num-warmups`` (requests sent and awaited before the timed run).

The bench line reproduces the prediction's workload: the ISL and OSL as mean lengths with a
+-:data:`BENCH_RANGE_RATIO` spread (``--random-range-ratio``; every output to its full length,
``--ignore-eos``), the chosen point's concurrency as a closed loop (``--max-concurrency``,
``--request-rate inf``), one concurrency's worth of warm-up requests (CUDA graphs, allocator, JIT out
of the timed run), and :func:`num_prompts_for` prompts so ramp-up and drain are a small part of the
run. The spread is what the steady state assumes: requests at random phases of each other. With
identical lengths a closed loop runs in lockstep, every request finishing in the same step and the
next wave of prompts prefilling together, so TTFT is a whole wave's (40.7 ms against the steady state's
15.2 ms for Qwen/Qwen3-0.6B on one h100_sxm, ISL 512 / OSL 128, concurrency 32, in simcast's own
bench-serve; 16.5 ms with the spread). ``tests/render/test_launch.py`` replays the line with ``simcast
bench-serve`` and gets the predicted output throughput and TTFT within 15 %.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from simcast.engines import get_engine
from simcast.engines.launch import HEAD, command_line
from simcast.engines.launch_rules import check_launch
from simcast.serving.steady.model import ServingConfig

BENCH_RANGE_RATIO = 0.2
"""Length spread of the bench line: lengths uniform in L(1-r)..L(1+r), the same means as the prediction."""
__all__ = ["BENCH_RANGE_RATIO", "LaunchLines", "command_line", "format_launch", "launch_dict", "launch_lines"]


@dataclass(frozen=True, kw_only=True)
class LaunchLines:
    """The commands of one layout: ``commands`` as (where it runs, command line), in order."""

    commands: tuple[tuple[str, str], ...]
    bench: str
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # engine rules a server line breaks (check_launch; empty unless a bug)

    @property
    def server(self) -> str:
        """The (first) server command: the whole launch on one node."""
        return next(c for _, c in self.commands if " serve " in f"{c} " or "launch_server" in c)


def num_prompts_for(concurrency: int) -> int:
    """Prompts for the bench line: enough that ramp-up and drain are a small share of the run."""
    return max(1000, 10 * concurrency)


def launch_dict(ll: LaunchLines) -> dict:
    """The JSON form of one layout's lines (``optimize --json`` under ``launch``)."""
    return {
        "server": ll.server,
        "commands": [{"where": w, "command": c} for w, c in ll.commands],
        "bench": ll.bench,
        "notes": list(ll.notes),
        "problems": list(ll.problems),
    }


def launch_lines(cfg: ServingConfig, engine: str, concurrency: int, router: str | None = None) -> LaunchLines:
    """Server and bench commands for ``cfg`` (its layout and per-replica batch) on ``engine``; with ``router``
    and replicas, the router's line where one exists (:meth:`simcast.engines.base.Engine.router_lines`).

    The limits come from ``engine``'s policy on the device with the user's overrides; if the
    search ran with another engine, a note says so (its step model was the other engine's).
    """
    same = engine == cfg.runtime
    pol = replace(cfg.redeployed(engine=engine), engine_profile=cfg.engine_profile if same else None).policy
    par = cfg.parallel
    b = max(1, concurrency // par.dp)  # per replica: the served point (the engine's limits may cap the batch)
    notes: list[str] = []
    if not same:
        notes.append(f"layout ranked with engine {cfg.runtime}'s step model; limits below are {engine}'s defaults")
    eng = get_engine(engine)
    commands = eng.server_lines(cfg, pol, b, notes)
    if router is not None and par.dp > 1:
        commands = eng.router_lines(commands, router, par.dp, notes)
    problems = []
    for _, cmd in commands:
        words = shlex.split(cmd.replace(HEAD, "HEAD_IP"))
        if eng.is_server_line(words):
            problems += check_launch(eng.launch_rules, words)
    if any(w not in ("", "router") for w, _ in commands):
        notes.append("multi-node: set HEAD_IP to node 0's address on every node; run each line on its node")
    return LaunchLines(
        commands=tuple(commands),
        bench=_bench(cfg, engine, concurrency),
        notes=tuple(notes),
        problems=tuple(problems),
    )


def _bench(cfg: ServingConfig, engine: str, concurrency: int) -> str:
    w = cfg.workload
    port: list = list(get_engine(engine).bench_port_args)
    bench = ["vllm", "bench", "serve", "--model", cfg.model.name, *port, "--dataset-name", "random"]
    bench += ["--random-input-len", w.input_length, "--random-output-len", w.output_length]
    bench += ["--random-range-ratio", BENCH_RANGE_RATIO, "--ignore-eos", "--request-rate", "inf"]
    bench += ["--num-warmups", concurrency, "--num-prompts", num_prompts_for(concurrency)]
    bench += ["--max-concurrency", concurrency]
    return command_line(bench)


def format_launch(entries: list[tuple[str, LaunchLines]], engine: str) -> str:
    """The ``--emit`` block: per ranked layout (label, lines), its commands and the bench command."""
    out = [f"launch commands (--emit {engine}; check each prediction with the bench line):"]
    for i, (label, ll) in enumerate(entries):
        out.append(f"{i + 1:>2} {label}")
        out += [f"   # {n}" for n in ll.notes]
        out += [f"   # RULE BROKEN (a simcast bug, please report): {p}" for p in ll.problems]
        out += [f"   {f'[{w}] ' if w else ''}{c}" for w, c in ll.commands]
        out.append(f"   {ll.bench}")
    return "\n".join(out)

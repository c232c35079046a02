"""Launch commands for a chosen layout (``simcast optimize --emit vllm|sglang``; pure text, no I/O).

For each ranked layout: the engine's server command(s) with the layout and the limits simcast
assumed (one per node when the layout spans nodes), each checked against the engine's argument
rules (:mod:`simcast.render.launch_rules`), and a ``vllm bench serve`` line whose workload is the one
the prediction is for. Flag names, from the engines' own argument parsers:

* vLLM ``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` @99d7eb5:
  ``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``,
  ``--enable-expert-parallel`` (the MoE layers' DP x TP ranks form one EP group instead of one TP
  group), ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--gpu-memory-utilization``,
  ``--quantization fp8``, ``--kv-cache-dtype fp8``; multi-node flags in ``launch_rules``.
* SGLang ``docs/advanced_features/server_arguments.md`` @b36e8e1: ``--tp-size``, ``--pp-size``,
  ``--dp-size``, ``--enable-dp-attention``, ``--ep-size``, ``--moe-dp-size``,
  ``--max-running-requests``, ``--chunked-prefill-size``, ``--mem-fraction-static``,
  ``--quantization fp8``, ``--kv-cache-dtype fp8_e4m3``, ``--nnodes``, ``--node-rank``,
  ``--dist-init-addr``; default port 30000 (``ServerArgs.port``). Under DP attention SGLang divides
  ``--chunked-prefill-size`` by ``--dp-size`` (``ServerArgs._handle_data_parallelism``) and
  ``--max-running-requests`` counts all DP ranks, so both are emitted as the per-rank value x dp.
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
bench-serve; 16.5 ms with the spread). ``tests/test_launch.py`` replays the line with ``simcast
bench-serve`` and gets the predicted output throughput and TTFT within 15 %.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace

from simcast.render.launch_rules import check_launch
from simcast.serving.model import ServingConfig

SGLANG_PORT = 30000  # SGLang's default server port (ServerArgs.port)
SGLANG_DIST_PORT = 50000  # any free port on the head node for --dist-init-addr
VLLM_DP_RPC_PORT = 13345  # any free port on the head node (vLLM's data-parallel deployment example uses 13345)
RAY_PORT = 6379  # ray start --head's default port
BENCH_RANGE_RATIO = 0.2
"""Length spread of the bench line: lengths uniform in L(1-r)..L(1+r), the same means as the prediction."""
HEAD = "${HEAD_IP}"
"""Node 0's address in multi-node lines: left unquoted so the shell expands it (set HEAD_IP first)."""


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


def launch_lines(cfg: ServingConfig, engine: str, concurrency: int) -> LaunchLines:
    """Server and bench commands for ``cfg`` (its layout and per-replica batch) on ``engine``.

    The limits come from ``engine``'s policy on the device with the user's overrides; if the
    search ran with another engine, a note says so (its step model was the other engine's).
    """
    same = engine == cfg.runtime
    pol = replace(cfg, runtime=engine, engine_profile=cfg.engine_profile if same else None).policy
    par = cfg.parallel
    b = max(1, concurrency // par.dp)  # per replica: the served point (the engine's limits may cap the batch)
    notes: list[str] = []
    if not same:
        notes.append(f"layout ranked with engine {cfg.runtime}'s step model; limits below are {engine}'s defaults")
    build = _vllm if engine == "vllm" else _sglang
    commands = build(cfg, pol, b, notes)
    problems = []
    for _, cmd in commands:
        words = shlex.split(cmd.replace(HEAD, "HEAD_IP"))
        if words[:2] == ["vllm", "serve"] or "sglang.launch_server" in words:
            problems += check_launch(engine, words)
    if any(w != "" for w, _ in commands):
        notes.append("multi-node: set HEAD_IP to node 0's address on every node; run each line on its node")
    return LaunchLines(
        commands=tuple(commands),
        bench=_bench(cfg, engine, concurrency),
        notes=tuple(notes),
        problems=tuple(problems),
    )


def _nodes(cfg: ServingConfig, ranks: int) -> int:
    dpn = cfg.device.links.devices_per_node
    return -(-ranks // dpn)


def _vllm(cfg: ServingConfig, pol, b: int, notes: list[str]) -> list[tuple[str, str]]:
    par, model = cfg.parallel, cfg.model.name
    dpn = cfg.device.links.devices_per_node
    base = ["vllm", "serve", model, "--tensor-parallel-size", par.tp, "--pipeline-parallel-size", par.pp]
    base += ["--data-parallel-size", par.dp, "--max-num-seqs", b]
    base += ["--max-num-batched-tokens", pol.max_num_batched_tokens, "--gpu-memory-utilization"]
    base.append(f"{pol.mem_fraction if pol.mem_fraction_of == 'total' else 0.9:g}")
    if cfg.model.moe is not None and par.ep > 1:
        base.append("--enable-expert-parallel")
        if par.ep != par.tp * par.dp:
            notes.append(
                f"vLLM's expert parallelism spans TP x DP = {par.tp * par.dp} ranks; "
                f"simcast's layout has EP={par.ep}, MoE-TP={par.moe_tp}, MoE-DP={par.moe_dp}"
            )
    base += _precision_flags(cfg, "vllm") + _speculative_flags(cfg, "vllm", notes)
    replica = par.tp * par.pp
    if par.world_size <= dpn:
        return [("", command_line(base))]
    if replica > dpn:  # one replica spans nodes: Ray places its workers
        n = _nodes(cfg, par.world_size)
        extra = ["--distributed-executor-backend", "ray"] + (["--data-parallel-backend", "ray"] if par.dp > 1 else [])
        out = [("node 0", command_line(["ray", "start", "--head", "--port", RAY_PORT]))]
        out += [(f"node {i}", command_line(["ray", "start", "--address", f"{HEAD}:{RAY_PORT}"])) for i in range(1, n)]
        return [*out, ("node 0", command_line(base + extra))]
    local = dpn // replica  # DP ranks per node
    out = []
    for i, start in enumerate(range(0, par.dp, local)):
        here = ["--data-parallel-size-local", min(local, par.dp - start)]
        here += ["--data-parallel-address", HEAD, "--data-parallel-rpc-port", VLLM_DP_RPC_PORT]
        if start:
            here += ["--headless", "--data-parallel-start-rank", start]
        out.append((f"node {i}", command_line(base + here)))
    return out


def _sglang(cfg: ServingConfig, pol, b: int, notes: list[str]) -> list[tuple[str, str]]:
    par, model = cfg.parallel, cfg.model.name
    dpn = cfg.device.links.devices_per_node
    moe = cfg.model.moe is not None
    dp_attention = moe and par.dp > 1  # simcast's MoE layers span a stage's tp x dp ranks: SGLang's DP attention
    tp = par.tp * par.dp if dp_attention else par.tp
    chunk = pol.max_num_batched_tokens * (par.dp if dp_attention else 1)
    running = b * par.dp if dp_attention else b
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", model, "--tp-size", tp, "--pp-size", par.pp]
    cmd += ["--dp-size", par.dp, "--max-running-requests", running, "--chunked-prefill-size", chunk]
    if cfg.dynamic_chunks:  # the chunk setting optimize --chunked-prefill-sizes chose
        cmd.append("--enable-dynamic-chunking")
    if dp_attention:
        cmd.append("--enable-dp-attention")
        notes.append(
            f"DP attention: --tp-size {tp} counts every GPU of a stage (attention TP {par.tp} in each of {par.dp} "
            f"DP groups); SGLang divides --chunked-prefill-size and --max-running-requests by --dp-size"
        )
    if pol.mem_fraction_of == "static":
        cmd += ["--mem-fraction-static", f"{pol.mem_fraction:g}"]
    if moe and par.ep > 1:
        cmd += ["--ep-size", par.ep]
    if moe and par.moe_dp > 1:
        cmd += ["--moe-dp-size", par.moe_dp]
    cmd += _precision_flags(cfg, "sglang") + _speculative_flags(cfg, "sglang", notes)
    server_ranks = tp * par.pp  # GPUs of one launch_server
    if par.world_size <= dpn:
        return [("", command_line(cmd))]
    if not dp_attention and par.dp > 1 and par.tp * par.pp <= dpn:  # replicas fit a node: one server per node
        local = max(1, dpn // (par.tp * par.pp))
        out = []
        for i, start in enumerate(range(0, par.dp, local)):
            here = [*cmd]
            here[here.index("--dp-size") + 1] = min(local, par.dp - start)
            out.append((f"node {i}", command_line(here)))
        urls = [f"http://node{i}:{SGLANG_PORT}" for i in range(len(out))]
        out.append(("router", command_line(["python", "-m", "sglang_router.launch_router", "--worker-urls", *urls])))
        notes.append("one server per node behind sglang_router (nodeN: each node's address)")
        return out
    if not dp_attention and par.dp > 1:  # each replica spans nodes: launch each as below, a router in front
        cmd[cmd.index("--dp-size") + 1] = 1
        notes.append(f"lines for one replica; launch all {par.dp} the same way (own HEAD_IP each) behind sglang_router")
        server_ranks = par.tp * par.pp
    n = _nodes(cfg, server_ranks)
    dist = ["--nnodes", n, "--dist-init-addr", f"{HEAD}:{SGLANG_DIST_PORT}"]
    return [(f"node {i}", command_line([*cmd, *dist, "--node-rank", i])) for i in range(n)]


def _bench(cfg: ServingConfig, engine: str, concurrency: int) -> str:
    w = cfg.workload
    port = ["--port", SGLANG_PORT] if engine == "sglang" else []
    bench = ["vllm", "bench", "serve", "--model", cfg.model.name, *port, "--dataset-name", "random"]
    bench += ["--random-input-len", w.input_length, "--random-output-len", w.output_length]
    bench += ["--random-range-ratio", BENCH_RANGE_RATIO, "--ignore-eos", "--request-rate", "inf"]
    bench += ["--num-warmups", concurrency, "--num-prompts", num_prompts_for(concurrency)]
    bench += ["--max-concurrency", concurrency]
    return command_line(bench)


def command_line(args: list) -> str:
    """A shell command line of ``args``, each one quoted (``shlex.quote``): a model name from a config file
    (``x; touch PWNED #``) stays one argument when the line is pasted into a shell. Only :data:`HEAD`
    (alone or as ``HEAD:port``) stays unquoted, for the shell to expand."""
    return " ".join(
        str(a)
        if str(a) == HEAD or str(a).startswith(HEAD + ":") and str(a)[len(HEAD) + 1 :].isdigit()
        else shlex.quote(str(a))
        for a in args
    )


def _precision_flags(cfg: ServingConfig, engine: str) -> list[str]:
    """``--quantization fp8`` when simcast applied W8A8 fp8 (a checkpoint quantised by its own
    config needs no flag) and the engine's spelling of an fp8 KV cache."""
    q, out = cfg.model.quant, []
    if q is not None and q.method == "fp8" and q.dense_format == "fp8":
        out += ["--quantization", "fp8"]
    if cfg.kv_cache_dtype == "fp8":
        out += ["--kv-cache-dtype", "fp8" if engine == "vllm" else "fp8_e4m3"]
    return out


VLLM_SPEC_METHOD = {"mtp": "mtp", "eagle": "eagle", "eagle3": "eagle3", "ngram": "ngram"}
SGLANG_SPEC_ALGORITHM = {"mtp": "NEXTN", "eagle": "EAGLE", "eagle3": "EAGLE3", "ngram": "NGRAM"}
DRAFT_PLACEHOLDER = "DRAFT_MODEL"


def _speculative_flags(cfg: ServingConfig, engine: str, notes: list[str]) -> list[str]:
    """The engine's speculative-decoding flags for ``cfg.speculative`` (a chain of ``k`` drafts, top-k 1)."""
    s = cfg.speculative
    if s is None:
        return []
    needs_head = s.method in ("eagle", "eagle3") and not s.draft_model
    if needs_head:
        notes.append(f"replace {DRAFT_PLACEHOLDER} with the {s.method} draft head's checkpoint")
    draft = s.draft_model or (DRAFT_PLACEHOLDER if needs_head else "")
    notes.append(f"speculative acceptance assumed {','.join(f'{a:g}' for a in s.acceptance)}: check the engine's log")
    if engine == "vllm":
        conf: dict[str, object] = {"method": VLLM_SPEC_METHOD[s.method], "num_speculative_tokens": s.k}
        if draft:
            conf["model"] = draft
        if s.method == "ngram":
            conf["prompt_lookup_max"] = s.k  # vLLM requires it for ngram; the n-gram window is not modelled
        return ["--speculative-config", json.dumps(conf, separators=(",", ":"))]
    out = ["--speculative-algorithm", SGLANG_SPEC_ALGORITHM[s.method], "--speculative-num-steps", str(s.k)]
    out += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(s.k + 1)]
    return out + (["--speculative-draft-model-path", draft] if draft else [])


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

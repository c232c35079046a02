"""``optimize --emit``: each engine's argument rules (one test per rule, each citing where the engine
enforces it), multi-node launch lines, ``--emit`` implying ``--engine``, and a bench line that replays
the prediction in simcast's own ``bench-serve``."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace

import pytest

from simcast.cli.main import main
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines import REGISTRY, get_engine
from simcast.engines.launch_rules import check_launch as check_rules
from simcast.inputs.loaders import load_device, load_model
from simcast.render.launch import BENCH_RANGE_RATIO, launch_lines
from simcast.serving.steady.model import ServingConfig, Workload

RULES = tuple(r for e in REGISTRY.values() for r in e.launch_rules)


def check_launch(engine: str, words: list[str]) -> list[str]:
    return check_rules(get_engine(engine).launch_rules, words)


def broken(engine: str, line: str) -> list[str]:
    return [m.split(":")[0] for m in check_launch(engine, shlex.split(line))]


SG = "python -m sglang.launch_server --model-path M "
VL = "vllm serve M "


# --- SGLang: python/sglang/srt/server_args.py@001067f and parallel_state.py --------------------------
def test_sglang_dp_attention_needs_dp_size_over_one():
    """server_args.py ServerArgs._handle_data_parallelism: dp_size == 1 turns enable_dp_attention off."""
    assert broken("sglang", SG + "--tp-size 8 --dp-size 1 --enable-dp-attention") == ["dp_attention_needs_dp"]
    assert broken("sglang", SG + "--tp-size 8 --dp-size 2 --enable-dp-attention") == []


def test_sglang_dp_attention_dp_divides_tp():
    """server_args.py ServerArgs._handle_data_parallelism: assert self.tp_size % self.dp_size == 0."""
    assert broken("sglang", SG + "--tp-size 6 --dp-size 4 --enable-dp-attention") == ["dp_attention_divides_tp"]
    assert broken("sglang", SG + "--tp-size 8 --dp-size 4 --enable-dp-attention") == []
    assert broken("sglang", SG + "--tp-size 6 --dp-size 4") == []  # router DP: replicas of tp 6 each


def test_sglang_ep_times_moe_dp_divides_tp():
    """parallel_state.py initialize_model_parallel: moe_tp_size = tp_size // moe_ep_size // moe_dp_size."""
    assert broken("sglang", SG + "--tp-size 8 --ep-size 3") == ["moe_groups_divide_tp"]
    assert broken("sglang", SG + "--tp-size 8 --ep-size 4 --moe-dp-size 4") == ["moe_groups_divide_tp"]
    assert broken("sglang", SG + "--tp-size 8 --dp-size 4 --enable-dp-attention --ep-size 8") == []


def test_sglang_multi_node_needs_rank_and_address():
    """server_args.py: --nnodes > 1 with --node-rank and --dist-init-addr (the launch's rendezvous)."""
    assert broken("sglang", SG + "--tp-size 16 --nnodes 2 --node-rank 0") == ["multi_node_needs_rank_and_address"]
    assert broken("sglang", SG + "--tp-size 16 --nnodes 2 --node-rank 2 --dist-init-addr h:5") == [
        "multi_node_needs_rank_and_address"
    ]
    assert broken("sglang", SG + "--tp-size 16 --nnodes 2 --node-rank 1 --dist-init-addr h:5") == []


def test_sglang_nodes_divide_the_servers_gpus():
    """server_args.py: each of --nnodes runs tp_size * pp_size // nnodes ranks."""
    line = SG + "--tp-size 4 --pp-size 3 --nnodes 5 --node-rank 0 --dist-init-addr h:5"
    assert broken("sglang", line) == ["nodes_divide_ranks"]


# --- vLLM: docs/serving/data_parallel_deployment.md@v0.12.0 ------------------------------------------
def test_vllm_local_dp_ranks_within_dp_size():
    """data_parallel_deployment.md: a node runs ranks start-rank .. start-rank + size-local - 1."""
    line = VL + "--data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 3 --headless"
    line += " --data-parallel-address h --data-parallel-rpc-port 1"
    assert broken("vllm", line) == ["local_dp_within_dp"]


def test_vllm_headless_needs_the_head():
    """data_parallel_deployment.md; multi_instance_data_parallel.py: --headless joins a head's address."""
    line = VL + "--data-parallel-size 4 --data-parallel-size-local 2 --headless --data-parallel-start-rank 2"
    assert "headless_needs_head" in broken("vllm", line)


def test_vllm_multi_node_dp_needs_address_and_port():
    """data_parallel_deployment.md: DP over several nodes talks to the head at --data-parallel-address/rpc-port."""
    assert broken("vllm", VL + "--data-parallel-size 4 --data-parallel-size-local 2") == ["multi_node_dp_needs_address"]
    assert broken("vllm", VL + "--data-parallel-size 4") == []


def test_every_rule_has_a_test_and_a_source():
    names = {r.name for r in RULES}
    here = open(__file__).read()
    assert all(f'"{n}"' in here for n in names)
    assert all("@" in r.source or "(" in r.source for r in RULES)


# --- emitted lines ------------------------------------------------------------------------------------
def _cfg(model: str, par: ParallelSpec, device: str = "h100_sxm", runtime: str = "vllm") -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(model=load_model(model), device=load_device(device), parallel=par, engine=runtime),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=8,
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(
    "model,par",
    [
        ("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, dp=2)),
        ("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, dp=8)),  # DP over two nodes
        ("meta-llama/Llama-3.1-405B", ParallelSpec(tp=8, pp=2)),  # one replica over two nodes
        ("meta-llama/Llama-3.1-70B", ParallelSpec(tp=8, pp=2, dp=2)),  # two replicas of two nodes each
        ("Qwen/Qwen3-30B-A3B", ParallelSpec(tp=2, dp=4, ep=8)),  # DP attention + EP
        ("Qwen/Qwen3-30B-A3B", ParallelSpec(tp=4, dp=4, ep=16)),  # DP attention + EP over two nodes
    ],
)
def test_emitted_lines_break_no_rule(engine, model, par):
    ll = launch_lines(_cfg(model, par, runtime=engine), engine, 16 * par.dp)
    assert ll.problems == ()
    for _, cmd in ll.commands:
        words = shlex.split(cmd)
        if "serve" in words[:2] or "sglang.launch_server" in words:
            assert check_launch(engine, words) == []
    nodes = -(-par.world_size // 8)  # h100_sxm: 8 per node
    assert (len(ll.commands) > 1) == (nodes > 1)  # one line per node (or Ray's start lines) when it spans nodes


def test_sglang_moe_dp_attention_and_multi_node():
    ll = launch_lines(_cfg("Qwen/Qwen3-30B-A3B", ParallelSpec(tp=4, dp=4, ep=16), runtime="sglang"), "sglang", 64)
    assert [w for w, _ in ll.commands] == ["node 0", "node 1"]
    f0, f1 = (shlex.split(c) for _, c in ll.commands)
    for f, rank in ((f0, "0"), (f1, "1")):
        assert f[f.index("--tp-size") + 1] == "16" and f[f.index("--dp-size") + 1] == "4"
        assert "--enable-dp-attention" in f and f[f.index("--ep-size") + 1] == "16"
        assert f[f.index("--nnodes") + 1] == "2" and f[f.index("--node-rank") + 1] == rank
        assert f[f.index("--dist-init-addr") + 1].startswith("${HEAD_IP}:")
    assert "${HEAD_IP}:50000" in ll.commands[0][1]  # unquoted: the shell expands it
    assert f0[f0.index("--max-running-requests") + 1] == "64"  # 16 per DP rank x 4


def test_vllm_dp_over_nodes_headless_and_replica_over_nodes_on_ray():
    ll = launch_lines(_cfg("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, dp=8)), "vllm", 64)
    (w0, c0), (w1, c1) = ll.commands
    assert "--data-parallel-size-local 4" in c0 and "--headless" not in c0
    assert "--headless --data-parallel-start-rank 4" in c1 and "--data-parallel-address ${HEAD_IP}" in c1
    ray = launch_lines(_cfg("meta-llama/Llama-3.1-405B", ParallelSpec(tp=8, pp=2)), "vllm", 8)
    cmds = [c for _, c in ray.commands]
    assert cmds[0].startswith("ray start --head") and cmds[1].startswith("ray start --address")
    assert cmds[2].endswith("--distributed-executor-backend ray")


def test_emit_implies_engine(capsys):
    args = ["optimize", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--num-devices", "1"]
    args += ["--input-length", "512", "--output-length", "64", "--batch-sizes", "8", "--json"]
    assert main(args + ["--emit", "sglang"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["run"]["engine"] == "sglang" and d["rows"][0]["engine"] == "sglang"
    assert main(args + ["--emit", "sglang", "--engine", "vllm"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["run"]["engine"] == "vllm" and d["launch"][0]["notes"]  # ranked with vllm's model: said so


@pytest.mark.slow
def test_bench_line_replays_the_prediction_within_15_percent(capsys):
    """The --emit bench line, run through simcast's own bench-serve, gives the steady-state prediction's
    output token/s and mean TTFT within 15 % (Qwen/Qwen3-0.6B, one h100_sxm, ISL 512 / OSL 128)."""
    args = ["optimize", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--num-devices", "1"]
    args += ["--input-length", "512", "--output-length", "128", "--batch-sizes", "32", "--emit", "vllm", "--json"]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out)
    row, bench = d["rows"][0], shlex.split(d["launch"][0]["bench"])
    assert bench[:3] == ["vllm", "bench", "serve"]
    assert bench[bench.index("--random-range-ratio") + 1] == str(BENCH_RANGE_RATIO)
    replay = ["bench-serve", "--device", "h100_sxm", "--engine", "vllm", *bench[3:]]
    assert main(replay) == 0
    out = capsys.readouterr().out
    metric = re.compile(r"^([^:]+\):)\s+(-?[0-9.]+)\s*$")  # vLLM's block: "Label (unit):   number"
    got = {m[1][:-1].strip(): float(m[2]) for m in map(metric.match, out.splitlines()) if m}
    assert got["Output token throughput (tok/s)"] == pytest.approx(row["tokens_per_s"], rel=0.15)
    assert got["Mean TTFT (ms)"] == pytest.approx(row["ttft_ms"], rel=0.15)


def test_model_flag_and_positional_are_one(capsys):
    base = ["optimize", "--device", "h100_sxm", "--num-devices", "1", "--input-length", "64", "--output-length", "8"]
    base += ["--batch-sizes", "1"]
    assert main(base + ["--model", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B"]) == 2
    assert "give it once" in capsys.readouterr().err
    assert main(base + ["--model", "Qwen/Qwen3-0.6B"]) == 0


def test_instruct_alias_resolves_with_one_note(capsys):
    args = ["simulate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--device", "h100_sxm", "--json"]
    assert main(args) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    notes = [x for x in cap.err.splitlines() if x.startswith("simcast: note:")]
    assert len(notes) == 1 and "meta-llama/Llama-3.1-8B config" in notes[0]
    base = load_model("meta-llama/Llama-3.1-8B")
    assert replace(load_model("meta-llama/Llama-3.1-8B-Instruct"), name=base.name) == base

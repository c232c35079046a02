"""``optimize --emit ... --router``: the router's launch line where one exists (engine modules' router_lines)."""

from __future__ import annotations

import shlex

from simcast.cli.main import main
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines import get_engine
from simcast.engines.launch_rules import check_launch
from simcast.inputs.loaders import load_device, load_model
from simcast.render.launch import launch_lines
from simcast.serving.steady.model import ServingConfig, Workload


def _cfg(model: str, par: ParallelSpec, runtime: str) -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(model=load_model(model), device=load_device("h100_sxm"), parallel=par, engine=runtime),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=8,
    )


def test_sglang_one_node_replicas_co_launch_sgl_router_with_the_policy():
    ll = launch_lines(_cfg("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, dp=2), "sglang"), "sglang", 32, "cache_aware")
    ((where, cmd),) = ll.commands
    words = shlex.split(cmd)
    assert words[:3] == ["python", "-m", "sglang_router.launch_server"] and words[-2:] == [
        "--router-policy",
        "cache_aware",
    ]
    assert get_engine("sglang").is_server_line(words) and check_launch(get_engine("sglang").launch_rules, words) == []
    assert ll.problems == ()


def test_sglang_router_line_takes_the_policy_and_replicas_over_nodes_get_one():
    ll = launch_lines(_cfg("meta-llama/Llama-3.1-70B", ParallelSpec(tp=8, dp=2), "sglang"), "sglang", 32, "random")
    assert ll.commands[-1][0] == "router" and ll.commands[-1][1].endswith("--policy random")
    big = launch_lines(
        _cfg("meta-llama/Llama-3.1-70B", ParallelSpec(tp=8, pp=2, dp=2), "sglang"), "sglang", 32, "round_robin"
    )
    where, line = big.commands[-1]
    assert where == "router" and "http://replica0:30000 http://replica1:30000 --policy round_robin" in line


def test_kv_aware_is_dynamos_frontend_and_others_are_noted():
    for engine in ("vllm", "sglang"):
        ll = launch_lines(_cfg("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, dp=2), engine), engine, 32, "kv_aware")
        assert ll.commands[-1] == (
            "router",
            "python -m dynamo.frontend --router-mode kv --kv-overlap-score-weight 1.0 --router-temperature 0.0",
        )
        assert not any("multi-node" in n for n in ll.notes)
    ll = launch_lines(_cfg("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, dp=2), "vllm"), "vllm", 32, "least_loaded")
    assert len(ll.commands) == 1 and any("4 x waiting + running" in n for n in ll.notes)
    ll = launch_lines(_cfg("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, dp=2), "sglang"), "sglang", 32, "prefix_aware")
    assert len(ll.commands) == 1 and any("llm-d" in n for n in ll.notes)
    one = launch_lines(_cfg("Qwen/Qwen3-0.6B", ParallelSpec(tp=2), "sglang"), "sglang", 8, "cache_aware")
    assert "sglang.launch_server" in one.commands[0][1]  # one replica: no router


def test_router_without_emit_is_refused(capsys):
    args = ["optimize", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--num-devices", "2"]
    args += ["--input-length", "512", "--output-length", "64", "--router", "cache_aware"]
    assert main(args) == 2
    assert "--router" in capsys.readouterr().err

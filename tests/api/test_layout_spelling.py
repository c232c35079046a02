"""The engines' own spelling of a layout (issue 26 item 1): SGLang's ``--tp-size/--dp-size`` and TensorRT-LLM's
``--enable-attention-dp`` give byte-identical results to simcast's ``--tp/--dp/--dp-attention``; a simcast flag
disagreeing with them is one error; the header says how they were read; the service YAML likewise."""

import json

import pytest

from simcast.api.bench import BenchOptions
from simcast.api.layout_spelling import layout_reading
from simcast.api.step import simulate_step, step_spec
from simcast.api.step_options import StepOptions
from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.core.layout_spelling import engine_layout
from simcast.serving.service_yaml import build_serving_config

MOE = "Qwen/Qwen3-30B-A3B"
DEV = "h100_sxm"


def _layouts():
    """(engine spelling, simcast spelling) pairs: SGLang with DP attention for every divisor D of T, SGLang
    replicas without it, TensorRT-LLM's attention DP; pp 1 and 2."""
    out = []
    for tp_size in (2, 4, 8):
        for d in (x for x in (2, 4, 8) if tp_size % x == 0):
            out.append(
                (
                    dict(tp_size=tp_size, dp_size=d, dp_attention=True, ep=tp_size),
                    dict(tp=tp_size // d, num_devices=tp_size, dp_attention=True, ep=tp_size),
                )
            )
    out.append((dict(tp_size=4, dp_size=2), dict(tp=4, num_devices=8)))  # SGLang --dp-size without DP attention
    out.append((dict(tp_size=4, enable_attention_dp=True, ep=4), dict(tp=1, num_devices=4, dp_attention=True, ep=4)))
    out.append(
        (
            dict(tp_size=4, dp_size=4, dp_attention=True, pp=2, ep=4),
            dict(tp=1, pp=2, num_devices=8, dp_attention=True, ep=4),
        )
    )
    return out


@pytest.mark.parametrize("native,ours", _layouts())
def test_engine_spelling_gives_the_same_spec(native, ours):
    """The checked SimSpec (layout, devices, batch) of each engine spelling equals simcast's spelling's."""
    kw = dict(model=MOE, device=DEV, batch_size=4, input_length=256, engine="sglang")
    assert step_spec(StepOptions(**kw, **native)) == step_spec(StepOptions(**kw, **ours))


@pytest.mark.slow
@pytest.mark.parametrize("native,ours", _layouts())
def test_engine_spelling_is_byte_identical(native, ours):
    """Every layout in the engine's spelling gives the same report, to the byte, as simcast's spelling."""
    kw = dict(model=MOE, device=DEV, batch_size=4, input_length=256, engine="sglang")
    a = simulate_step(**kw, **native).to_dict()
    b = simulate_step(**kw, **ours).to_dict()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_bench_options_read_the_same_layout():
    """bench-serve: SGLang's and TensorRT-LLM's spellings set simcast's tp/dp/dp_attention (8 GPUs, DP8 x TP1)."""
    sg = BenchOptions(model=MOE, device=DEV, tp_size=8, dp_size=8, dp_attention=True, ep=8)
    trt = BenchOptions(model=MOE, device=DEV, tp_size=8, enable_attention_dp=True, ep=8)
    ours = BenchOptions(model=MOE, device=DEV, tp=1, dp=8, dp_attention=True, ep=8)
    for o in (sg, trt):
        assert (o.tp, o.pp, o.dp, o.dp_attention, o.ep) == (ours.tp, ours.pp, ours.dp, True, 8)
    assert "8 GPUs, attention DP 8 x attention TP 1" in layout_reading(sg)
    assert layout_reading(ours) == ""


def test_engine_layout_by_hand():
    """SGLang --tp-size 16 --dp-size 4 --enable-dp-attention: attention TP 16/4 = 4 per DP rank, 16 GPUs a stage;
    without DP attention, 4 replicas of TP16 (64 GPUs); at --dp-size 1 SGLang switches DP attention off."""
    a = engine_layout(tp_size=16, dp_size=4, enable_dp_attention=True, enable_attention_dp=False, pp=1)
    assert (a.tp, a.dp, a.dp_attention) == (4, 4, True) and "16 GPUs" in a.reading
    b = engine_layout(tp_size=16, dp_size=4, enable_dp_attention=False, enable_attention_dp=False, pp=1)
    assert (b.tp, b.dp, b.dp_attention) == (16, 4, False) and "64 GPUs" in b.reading
    c = engine_layout(tp_size=8, dp_size=1, enable_dp_attention=True, enable_attention_dp=False, pp=2)
    assert (c.tp, c.dp, c.dp_attention) == (8, 1, False) and "16 GPUs" in c.reading


@pytest.mark.parametrize(
    "kw,flag",
    [
        (dict(tp=8, tp_size=8, dp_size=8, dp_attention=True), "--tp"),  # simcast --tp 8 vs attention TP 1
        (dict(num_devices=16, tp_size=8, enable_attention_dp=True), "--num-devices"),  # 8 GPUs, not 16
        (dict(dp=4, tp_size=8, dp_size=8, dp_attention=True), "--dp"),
        (dict(dp_size=8, dp_attention=True), "--tp-size"),  # the engine's TP size missing
        (dict(tp=8, enable_attention_dp=True), "--tp-size"),  # TRT-LLM's tp_size typed as simcast's --tp
        (dict(tp_size=8, dp_size=3, dp_attention=True), "--dp-size"),  # 3 does not divide 8
        (dict(tp_size=8, dp_size=2, enable_attention_dp=True), "--dp-size"),  # TRT-LLM has no dp size
    ],
)
def test_conflicting_spellings_refused(kw, flag):
    with pytest.raises(SimcastInputError) as e:
        StepOptions(model=MOE, device=DEV, **kw)
    assert e.value.field == flag


def test_conflict_is_one_line_exit_2(capsys):
    rc = main(
        ["simulate", "--model", MOE, "--device", DEV, "--tp", "8", "--tp-size", "8", "--dp-size", "8", "--dp-attention"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--tp" in err and "one spelling" in err


def test_header_says_gpus_and_reading(capsys):
    args = ["simulate", "--model", MOE, "--device", DEV, "--tp-size", "8", "--dp-size", "4"]
    rc = main([*args, "--enable-dp-attention", "--ep-size", "8", "--batch", "2", "--input-length", "128"])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0 and "on 8 x h100_sxm (TP=2 | PP=1 | DP=4)" in lines[0]
    assert lines[1].startswith("layout: --tp-size 8 --dp-size 4 --enable-dp-attention read as the engine counts")
    assert (
        "8 GPUs, attention DP 4 x attention TP 2" in lines[1] and "(simcast: --tp 2 --dp 4 --dp-attention)" in lines[1]
    )


def _yaml(par):
    return {
        "model": MOE,
        "device": DEV,
        "runtime": "sglang",
        "workload": {"input_length": 512, "output_length": 64, "batch_size": 4},
        "parallel_config": par,
    }


def test_service_yaml_engine_spelling():
    """layout_spelling: engine (SGLang) and TensorRT-LLM's keys give simcast's ParallelSpec; simcast's own keys
    keep their meaning; a TRT-LLM key and its simcast twin disagreeing is one error naming the key."""
    ours, _ = build_serving_config(_yaml({"tp_size": 1, "dp_size": 8, "enable_dp_attention": True, "ep_size": 8}), {})
    sg, v = build_serving_config(
        _yaml({"layout_spelling": "engine", "tp_size": 8, "dp_size": 8, "enable_dp_attention": True, "ep_size": 8}),
        {},
    )
    trt, w = build_serving_config(
        _yaml({"tensor_parallel_size": 8, "enable_attention_dp": True, "moe_expert_parallel_size": 8}), {}
    )
    assert sg.parallel == ours.parallel == trt.parallel
    assert v["layout_read"].startswith("tp_size: 8, dp_size: 8, enable_dp_attention: true read as")
    assert w["layout_read"].startswith("tensor_parallel_size: 8, enable_attention_dp: true read as")
    with pytest.raises(SimcastInputError) as e:
        build_serving_config(_yaml({"tensor_parallel_size": 8, "tp_size": 2, "enable_attention_dp": True}), {})
    assert e.value.field == "parallel_config.tensor_parallel_size"


def test_trtllm_spelling_typed_as_simcast_points_at_tp_size():
    """TensorRT-LLM's `tensor_parallel_size: 8, enable_attention_dp` typed as simcast's --tp 8 --dp-attention (one
    attention-DP rank on 8 devices) is refused, the message giving the engine spelling (--tp-size 8)."""
    with pytest.raises(SimcastInputError, match="--tp-size 8") as e:
        step_spec(StepOptions(model=MOE, device=DEV, tp=8, ep=8, dp_attention=True))
    assert e.value.field == "--dp-attention"

"""Speculative decoding: tokens per step, the verify step, the draft's cost and memory, flags, bench-serve."""

import argparse
import math
from dataclasses import replace

import pytest

from simcast.cli.speculative import add_speculative_args, speculative_from_args
from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch, ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.render.assumption_text import assumption_lines
from simcast.serving.kv_memory import kv_budgets, kv_capacity_tokens, memory_fit, stage_fixed
from simcast.serving.request_level.scheduler import RequestSpec
from simcast.serving.request_level.simulate import simulate_requests
from simcast.serving.speculative.draft import draft_kv_bytes_per_token, draft_model, draft_weight_bytes
from simcast.serving.speculative.spec import (
    DEFAULT_ACCEPTANCE,
    SpeculativeSpec,
    from_mapping,
    from_sglang_flags,
    from_vllm_json,
    parse_acceptance,
)
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, estimate_serving

LLAMA8B = "meta-llama/Llama-3.1-8B"


def spec(method="eagle", k=3, acc=(0.8,)):
    return SpeculativeSpec(method=method, num_speculative_tokens=k, acceptance=acc)


def test_expected_tokens_by_hand():
    # per position 0.8, 0.6, 0.4: E = 0.8 + 0.8*0.6 + 0.8*0.6*0.4 = 0.8 + 0.48 + 0.192
    s = spec(acc=(0.8, 0.6, 0.4))
    assert s.expected_accepted == pytest.approx(1.472)
    assert s.tokens_per_step == pytest.approx(2.472)
    # a mean rate 0.7 means 0.7 at every position: 0.7 + 0.49 + 0.343
    assert spec(acc=(0.7,)).acceptance == (0.7, 0.7, 0.7)
    assert spec(acc=(0.7,)).expected_accepted == pytest.approx(1.533)
    assert spec(acc=(1.0,)).tokens_per_step == 4.0  # all accepted: k + 1
    assert spec(acc=(0.0,)).tokens_per_step == 1.0  # none: the verified token only
    assert spec(k=5).verify_tokens == 6


def test_spec_checks_its_values():
    with pytest.raises(SimcastInputError):
        spec(acc=(0.8, 0.6))  # neither 1 value nor k
    with pytest.raises(SimcastInputError):
        spec(acc=(1.2,))
    with pytest.raises(SimcastInputError):
        spec(k=0)
    with pytest.raises(SimcastInputError):
        spec(method="medusa")
    assert parse_acceptance("0.8, 0.6,0.4") == (0.8, 0.6, 0.4)
    for bad in ("x", "0.8,,0.4", "1.5", "-0.1"):
        with pytest.raises(SimcastInputError):
            parse_acceptance(bad)


def test_default_acceptance_is_labelled_and_ngram_has_none():
    s = from_vllm_json('{"method": "eagle3", "num_speculative_tokens": 3}')
    assert s.acceptance == (DEFAULT_ACCEPTANCE["eagle3"][0],) * 3
    assert "DEFAULT from EAGLE-3 paper" in s.describe()
    given = from_vllm_json('{"method": "eagle3", "num_speculative_tokens": 3}', (0.5,))
    assert "given (--spec-acceptance)" in given.describe()
    with pytest.raises(SimcastInputError, match="no published default"):
        from_vllm_json('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}')


def _args(argv):
    p = argparse.ArgumentParser()
    add_speculative_args(p)
    return p.parse_args(argv)


def _core(s):
    return (s.method, s.num_speculative_tokens, s.acceptance, s.acceptance_given)


def test_flags_round_trip_vllm_json_and_sglang_to_one_spec():
    llama = load_model(LLAMA8B)
    v = speculative_from_args(
        _args(
            [
                "--speculative-config",
                '{"method": "eagle3", "num_speculative_tokens": 3}',
                "--spec-acceptance",
                "0.8,0.6,0.4",
            ]
        ),
        llama,
    )
    g = speculative_from_args(
        _args(
            [
                "--speculative-algorithm",
                "EAGLE3",
                "--speculative-num-steps",
                "3",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "4",
                "--spec-acceptance",
                "0.8,0.6,0.4",
            ]
        ),
        llama,
    )
    assert _core(v) == _core(g) == ("eagle3", 3, (0.8, 0.6, 0.4), True)
    # MTP: vLLM's default k is the model's num_nextn_predict_layers (1 for DeepSeek-V3); SGLang's NEXTN
    ds = load_model("deepseek-ai/DeepSeek-V3")
    assert ds.num_mtp_layers == 1
    vm = speculative_from_args(_args(["--speculative-config", '{"method": "deepseek_mtp"}']), ds)
    gm = speculative_from_args(_args(["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1"]), ds)
    assert _core(vm) == _core(gm) == ("mtp", 1, (0.85,), False)
    assert vm.acceptance_source == gm.acceptance_source == DEFAULT_ACCEPTANCE["mtp"][1]
    # n-gram: SGLang's draft tokens include the verified one
    ng = from_sglang_flags("NGRAM", num_steps=None, topk=None, num_draft_tokens=4, rates=(0.3,))
    assert _core(ng) == _core(from_vllm_json('{"method": "ngram", "num_speculative_tokens": 3}', (0.3,)))
    # the service YAML block takes vLLM's keys
    y = from_mapping({"method": "eagle3", "num_speculative_tokens": 3, "acceptance": [0.8, 0.6, 0.4]})
    assert _core(y) == _core(v) and "given (speculative.acceptance)" in y.describe()
    assert speculative_from_args(_args([]), llama) is None


def test_sglang_tree_and_mismatches():
    # a tree (top-k > 1) needs the tokens it verifies, at most num_steps x topk + 1
    with pytest.raises(SimcastInputError, match="speculative-eagle-topk > 1"):
        from_sglang_flags("EAGLE", num_steps=3, topk=4, num_draft_tokens=None)
    with pytest.raises(SimcastInputError, match="num_steps x topk"):
        from_sglang_flags("EAGLE", num_steps=3, topk=2, num_draft_tokens=8)
    t = from_sglang_flags("EAGLE", num_steps=3, topk=4, num_draft_tokens=8, rates=(0.7,))
    assert t.is_tree and t.verify_tokens == 8 and t.widths == (1, 4, 4)
    s = from_sglang_flags("EAGLE", num_steps=3, topk=1, num_draft_tokens=8, rates=(0.7,))
    assert s.k == 3 and "set to num_steps + 1 = 4" in s.note  # as SGLang resets it with top-k 1
    with pytest.raises(SimcastInputError, match="MTP layers"):
        speculative_from_args(
            _args(["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1"]), load_model(LLAMA8B)
        )


@pytest.fixture(scope="module")
def base():
    return ServingConfig(
        deployment=Deployment(
            model=load_model(LLAMA8B), device=load_device("h100_sxm"), parallel=ParallelSpec(tp=1), engine="vllm"
        ),
        workload=Workload(input_length=1024, output_length=256),
        batch_size=32,
    )


def test_eagle_draft_memory_by_hand_llama31_8b(base):
    """One Llama-3.1-8B decoder layer + the 2h -> h fc, bf16, TP 1; its KV: one layer's K and V."""
    h, kv, inter = 4096, 8 * 128, 14336
    layer = h * h + 2 * h * kv + h * h + 3 * h * inter + 2 * h  # q, k+v, o, gate/up/down, two norms
    fc = 2 * h * h
    s = spec()
    assert draft_weight_bytes(base.model, s, base.parallel) == 2 * (layer + fc) == 503_332_864
    assert draft_kv_bytes_per_token(base.model, s, 1) == 2 * kv * 2 == 4096
    cfg = replace(base, speculative=s)
    w0, _, _ = stage_fixed(base)
    w1, act, _ = stage_fixed(cfg)
    assert w1[-1] - w0[-1] == 503_332_864
    # the draft's weights come out of the KV budget, its KV joins every token: 32 target layers + 1 draft
    budget = kv_budgets(cfg, w1, act)[0]
    per_token = 32 * 2 * kv * 2 + 4096
    assert kv_capacity_tokens(cfg) == budget // per_token
    assert kv_capacity_tokens(cfg) < kv_capacity_tokens(base)
    assert memory_fit(cfg).stage_kv_bytes[0] > memory_fit(base).stage_kv_bytes[0]


def test_draft_shapes():
    ds = load_model("deepseek-ai/DeepSeek-V3")
    mtp = draft_model(ds, spec("mtp", 1, (0.85,)))
    assert mtp.num_layers == 1 and mtp.mla is not None and mtp.is_moe_layer(0)  # the MTP layer: MLA + MoE
    eagle = draft_model(ds, spec())
    assert eagle.num_layers == 1 and eagle.moe is None  # an EAGLE head is a dense Llama layer
    assert draft_model(ds, spec("ngram", 3, (0.3,))) is None


@pytest.mark.slow  # traces the target and the draft (a fresh trace cache per test session)
def test_acceptance_zero_costs_more_one_emits_k_plus_one(base):
    plain = estimate_serving(base)
    zero = estimate_serving(replace(base, speculative=spec(acc=(0.0,))))
    one = estimate_serving(replace(base, speculative=spec(acc=(1.0,))))
    assert zero.tpot_s > plain.tpot_s  # a bigger step (verify of 4 tokens + 3 draft passes) for one token
    assert zero.tokens_per_s < plain.tokens_per_s
    assert one.tpot_s < plain.tpot_s and one.tokens_per_s > plain.tokens_per_s
    assert any(
        "speculative decoding" in a and "[given (--spec-acceptance)]" in a for a in assumption_lines(one.assumptions)
    )
    # TPOT is the step over tokens per step: the decode-only verify step + draft, over 4 tokens
    c = coster_for(replace(base, speculative=spec(acc=(1.0,))))
    b = round(one.config.batch_size)
    step = c.cycle_s(Batch(query_lens=(4,), context_lens=(1024 + 128,), counts=(b,)), 1, b, 1024 + 128)
    assert one.decode_cycle_s == pytest.approx(step / 4)


@pytest.mark.slow  # traces the target and the draft (a fresh trace cache per test session)
def test_bench_serve_emits_k_plus_one_tokens_per_step_at_acceptance_one(base):
    """One request alone, OSL 41: its prefill step makes token 1, then 40 tokens in steps of k + 1 = 4."""
    cfg = replace(base, speculative=spec(acc=(1.0,)), workload=Workload(input_length=64, output_length=41))
    reqs = [RequestSpec(arrival_s=0.0, input_len=64, output_len=41)]
    res = simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=kv_capacity_tokens(cfg))
    assert res.steps == 1 + math.ceil(40 / 4)
    assert list(res.step_tokens) == [1] + [4] * 10
    # acceptance 0.5 at k 1: 1.5 tokens per step, deterministic (alternating 1 and 2 after the carry)
    half = replace(cfg, speculative=spec(k=1, acc=(0.5,)))
    res = simulate_requests(reqs, coster_for(half), kv_tokens_per_replica=kv_capacity_tokens(half))
    assert sum(res.step_tokens) == 41 and res.steps == 1 + math.ceil(40 / 1.5)


@pytest.mark.slow
def test_steady_state_matches_bench_serve_throughput_with_spec_on(base):
    from simcast.serving.request_level.bench_window import steady_window
    from simcast.serving.request_level.simulate import make_requests

    cfg = replace(base, speculative=spec(acc=(0.8,)), workload=Workload(input_length=512, output_length=128))
    steady = estimate_serving(cfg)
    # lengths spread +-50% around the means: fixed lengths sent at once start and finish in lock-step waves
    # (bursts of prefill), a gap of its own that the plain engine shows too (-6.5% here without speculation)
    reqs = make_requests(num_prompts=320, rate=math.inf, input_len=512, output_len=128, range_ratio=0.5)
    res = simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=kv_capacity_tokens(cfg), max_concurrency=32)
    win = steady_window(res)
    assert win.reached
    assert win.output_tokens_per_s == pytest.approx(steady.tokens_per_s, rel=0.05)


@pytest.mark.slow
def test_service_yaml_block_equals_the_flags(tmp_path, capsys):
    import json
    from pathlib import Path

    from simcast.cli.main import main

    dev = str(Path(__file__).parents[1] / "data" / "golden_device.yaml")
    text = (
        f"model: Qwen/Qwen3-0.6B\ndevice: {dev}\nworkload:\n  input_length: 512\n  output_length: 128\n"
        "  batch_size: 8\nparallel_config:\n  tp_size: 1\n"
    )
    plain = tmp_path / "plain.yaml"
    plain.write_text(text)
    block = tmp_path / "spec.yaml"
    block.write_text(text + "speculative:\n  method: eagle3\n  num_speculative_tokens: 2\n  acceptance: [0.7, 0.5]\n")

    def row(*args):
        assert main(["serve-config", *map(str, args), "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    a = row(block)
    b = row(
        plain,
        "--speculative-config",
        '{"method": "eagle3", "num_speculative_tokens": 2}',
        "--spec-acceptance",
        "0.7,0.5",
    )
    c = row(plain, "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--spec-acceptance", "0.7,0.5")
    d = row(plain)
    keys = [k for k in a if k.endswith("_ms") or k.endswith("_per_s")]
    assert keys and all(a[k] == b[k] == c[k] for k in keys)
    assert a["tpot_ms"] != d["tpot_ms"]


def test_verify_steps_count_as_decode_for_cuda_graphs():
    from simcast.engines import cuda_graphs

    verify = Batch(query_lens=(4,), context_lens=(1000,), counts=(8,))
    assert not cuda_graphs.captured("sglang", verify, 80.0, 1)  # without speculation a 4-token row is a prefill
    assert cuda_graphs.captured("sglang", verify, 80.0, 1, decode_query_len=4)  # SGLang's TARGET_VERIFY graphs
    assert cuda_graphs.captured("trtllm", verify, 80.0, 1, decode_query_len=4)
    assert not cuda_graphs.captured("sglang", Batch(query_lens=(5,), context_lens=(0,)), 80.0, 1, decode_query_len=4)


@pytest.mark.slow
def test_mla_verify_rows_run_the_absorbed_decode_kernel():
    """DeepSeek-V3 verify rows (q = 2) as decode rows: 2·r·H·(nope·lat + lat·v) + 2·H·pairs·((lat+rope) + lat)
    with r = 2 rows per request and pairs = q·c + q(q+1)/2 per request; as prefill rows the whole context's
    latent would be decompressed, far more."""
    from simcast.sim.simulate import simulate

    m = load_model("deepseek-ai/DeepSeek-V3")
    batch = Batch(query_lens=(2,), context_lens=(4096,), counts=(16,))
    base = dict(model=m, device=load_device("h200_sxm"), parallel=ParallelSpec(tp=8, ep=8), batch=batch)
    from simcast.core.specs import SimSpec

    def mla_flops(dq):
        rep = simulate(SimSpec(**base, decode_query_len=dq))
        return next(o.flops for st in rep.stages for o in st.ops if o.op == "simcast::mla_attention")

    heads, nope, rope, v, lat = 128 // 8, 128, 64, 128, 512
    r, pairs = 16 * 2, 16 * (2 * 4096 + 3)
    want = 2.0 * r * heads * (nope * lat + lat * v) + 2.0 * heads * pairs * ((lat + rope) + lat)
    assert mla_flops(2) == pytest.approx(want)
    assert mla_flops(1) > 10 * want


def test_emitted_launch_flags_read_back_to_the_same_spec(base):
    """optimize --emit prints the engine's own speculative flags; read back, they give the spec again."""
    import shlex

    from simcast.render.launch import launch_lines

    s = from_vllm_json(
        '{"method": "eagle3", "num_speculative_tokens": 3, "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}', (0.7,)
    )
    cfg = replace(base, speculative=s)
    words = shlex.split(launch_lines(cfg, "vllm", 32).commands[0][1])
    back = from_vllm_json(words[words.index("--speculative-config") + 1], (0.7,))
    assert _core(back) == _core(s) and back.draft_model == s.draft_model
    words = shlex.split(launch_lines(cfg, "sglang", 32).commands[0][1])
    flag = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--speculative")}
    again = from_sglang_flags(
        flag["--speculative-algorithm"],
        num_steps=int(flag["--speculative-num-steps"]),
        topk=int(flag["--speculative-eagle-topk"]),
        num_draft_tokens=int(flag["--speculative-num-draft-tokens"]),
        rates=(0.7,),
        draft_model=flag["--speculative-draft-model-path"],
    )
    assert _core(again) == _core(s) and not again.note

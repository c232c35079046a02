"""MoE / MLA stage traces: FLOPs = 2 x active parameters, weights = all experts, MLA KV bytes exact."""

import pytest

from simcast.core.kv import kv_elements_per_token_layer
from simcast.core.params import active_params, total_params
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.kernels.moe_kernels import ranks_per_token
from simcast.cost.ops.moe import active_experts, busiest_rank_pairs
from simcast.inputs.loaders import load_device, load_model
from simcast.sim.simulate import simulate

ATTN = ("simcast::attention", "simcast::attention_sliding")


def _gemm_flops(report, model, t):
    """Traced GEMM FLOPs of the step with attention's score/value terms taken out (MLA: hand formula)."""
    total = 0.0
    for st in report.stages:
        for o in st.ops:
            if (
                o.op in ATTN
                or o.bound == "Comm"
                or o.op.startswith("simcast::")
                and o.op not in ("simcast::moe_experts", "simcast::quant_linear", "simcast::mla_attention")
            ):
                continue
            f = o.flops
            if o.op == "simcast::mla_attention":  # minus the causal attention part, 2·H·(nope+rope+v)·pairs
                a = model.mla
                heads = model.num_heads // report.spec.parallel.tp
                f -= 2.0 * heads * (a.qk_head_dim + a.v_head_dim) * t * (t + 1) / 2
            total += f * o.count
    return total


@pytest.mark.parametrize(
    "name,tp,ep",
    [
        ("Qwen/Qwen3-30B-A3B", 1, 1),
        ("mistralai/Mixtral-8x7B-v0.1", 2, 2),
        ("openai/gpt-oss-20b", 1, 1),
        ("deepseek-ai/DeepSeek-V3", 2, 2),
    ],
)
@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_traced_flops_equal_twice_active_params(name, tp, ep):
    """One prefill request of T tokens: Σ GEMM FLOPs per rank x tp = 2·T·(active − lm_head) + 2·1·lm_head
    (lm_head runs on each request's last token only). ep = moe_tp·... splits experts, not FLOPs (uniform routing)."""
    m, t = load_model(name), 512
    spec = SimSpec(
        model=m, device=load_device("h200_sxm"), parallel=ParallelSpec(tp=tp, ep=ep), batch=Batch.prefill(1, t)
    )
    head = m.vocab_size * m.hidden_size
    want = 2.0 * t * (active_params(m) - head - m.hidden_size) + 2.0 * head
    got = _gemm_flops(simulate(spec), m, t) * tp
    if ep == 1:
        assert got == pytest.approx(want, rel=0.01)
    else:  # the busiest rank carries mean + sigma·sqrt(2 ln ep) pairs: above the mean, never below
        assert want * 0.99 <= got <= want * 1.35


@pytest.mark.parametrize(
    "name,tp,ep",
    [
        ("Qwen/Qwen3-235B-A22B", 8, 8),
        ("deepseek-ai/DeepSeek-V3", 1, 8),
        ("openai/gpt-oss-120b", 2, 1),
        ("mistralai/Mixtral-8x7B-v0.1", 4, 2),
    ],
)
@pytest.mark.slow
def test_weights_count_all_experts(name, tp, ep):
    """Σ over the stage's ranks of per-rank weights = total params x bytes (+ replicated parts); bf16 models exact
    within 1 % with replication taken out."""
    m = load_model(name)
    dp = 8 // tp if name == "deepseek-ai/DeepSeek-V3" else 1
    spec = SimSpec(
        model=m, device=load_device("h200_sxm"), parallel=ParallelSpec(tp=tp, dp=dp, ep=ep), batch=Batch.prefill(1, 16)
    )
    per_rank = simulate(spec).stages[0].weight_bytes
    if m.quant is None:
        # replicated on every rank: norms, router; embedding/lm_head are vocab-sharded
        rep = m.num_layers * (2 * m.hidden_size + m.hidden_size * m.moe.num_experts) * 2
        assert (per_rank - rep) * tp + rep == pytest.approx(total_params(m) * 2, rel=0.01)
    elif m.mla is not None:  # DeepSeek-V3 fp8 block-scaled (1 + 4/128² B per GEMM weight), tp 1, ep 8
        fp8 = 1 + 4 / 128**2
        routed = 58 * 256 * 3 * 7168 * 2048
        emb = 2 * 129280 * 7168
        router_norms = 58 * (7168 * 256 + 256) + 61 * (2 * 7168 + 1536 + 512) + 7168
        other_gemm = total_params(m) - routed - emb - router_norms
        want = routed / 8 * fp8 + other_gemm * fp8 + (emb + router_norms) * 2
        assert per_rank == pytest.approx(want, rel=0.01)
    else:  # gpt-oss-120b: experts mxfp4 (4.25 bits) / moe_tp 2, biases bf16; attention / tp 2 in bf16
        lp_e = 36 * 128 * 3 * 2880 * 2880
        bias = 36 * 128 * (2 * 2880 + 2880)
        rest = total_params(m) - lp_e - bias
        router_norms = 36 * (2880 * 128 + 128 + 2 * 2880)
        want = lp_e * 4.25 / 8 / 2 + bias * 2 / 2 + (rest - router_norms) * 2 / 2 + router_norms * 2
        assert per_rank == pytest.approx(want, rel=0.01)


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_mla_kv_bytes_per_token_exact():
    """DeepSeek-V3: 512 (kv_lora_rank) + 64 (rope) = 576 elements per token per layer, on every TP rank."""
    ds = load_model("deepseek-ai/DeepSeek-V3")
    for tp in (1, 8):
        assert kv_elements_per_token_layer(ds, sharded_dims(ds, tp)) == 576
    spec = SimSpec(
        model=ds, device=load_device("h200_sxm"), parallel=ParallelSpec(tp=8, ep=8), batch=Batch.decode(4, 1000)
    )
    r = simulate(spec)
    assert r.stages[0].kv_cache_bytes == 4 * 1001 * 61 * 576 * 2
    fp8 = simulate(
        SimSpec(
            model=ds,
            device=load_device("h200_sxm"),
            parallel=ParallelSpec(tp=8, ep=8),
            batch=Batch.decode(4, 1000),
            kv_cache_dtype="fp8",
        )
    )
    assert fp8.stages[0].kv_cache_bytes == 4 * 1001 * 61 * 576


def test_routing_formulas_hand_values():
    # ep 1: every pair on the one rank
    assert busiest_rank_pairs(100, 8, 128, 1) == 800
    # E 8, k 2, ep 8, N 64: mean 16, var 64·2·(1/8)(7/8)(6/7) = 12, busiest 16 + sqrt(12)·sqrt(2 ln 8)
    assert busiest_rank_pairs(64, 2, 8, 8) == pytest.approx(16 + 12**0.5 * (2 * 2.0794415) ** 0.5)
    assert busiest_rank_pairs(64, 2, 8, 8, imbalance=3.0) == 64  # 3 x 23.06, capped at N·min(k, E/ep) = 64
    assert active_experts(1, 8, 256, 8) == pytest.approx(32 * 8 / 256)  # one token: k/ep experts per rank
    assert ranks_per_token(2, 8, 8) == pytest.approx(2)  # E/ep = 1 expert per rank: k distinct ranks
    assert ranks_per_token(8, 256, 1) == 1


@pytest.mark.slow  # ~1 s or more: out of make test-fast
def test_sliding_window_caps_attention_and_kv():
    oss = load_model("openai/gpt-oss-20b")
    spec = SimSpec(model=oss, device=load_device("h100_sxm"), parallel=ParallelSpec(tp=1), batch=Batch.decode(2, 4000))
    r = simulate(spec)
    per = 2 * 8 * 64 * 2  # K and V, 8 kv heads x 64, bf16
    assert r.stages[0].kv_cache_bytes == per * 2 * (12 * 4001 + 12 * 128)  # 12 full + 12 sliding layers
    sw = [o for o in r.stages[0].ops if o.op == "simcast::attention_sliding"]
    full = [o for o in r.stages[0].ops if o.op == "simcast::attention"]
    assert sw and full and sw[0].flops * 4001 == pytest.approx(full[0].flops * 128, rel=0.01)


@pytest.mark.slow
def test_optimizer_deepseek_fp8_fits_h200_not_h100(capsys):
    """DeepSeek-V3 in fp8 (~671 GB of weights): 8 x H200 (141 GB) holds it, 8 x H100 (80 GB) does not."""
    import json

    from simcast.cli.main import main

    args = [
        "optimize",
        "--input-length",
        "1024",
        "--output-length",
        "256",
        "--num-devices",
        "8",
        "--tp-sizes",
        "1",
        "8",
        "--ep-sizes",
        "8",
        "--json",
        "deepseek-ai/DeepSeek-V3",
    ]
    assert main(args[:1] + ["--device", "h100_sxm"] + args[1:]) == 3  # no layout fits: exit 3
    h100 = json.loads(capsys.readouterr().out)
    assert h100["rows"] == [] and all("does not fit" in r["reason"] for r in h100["rejected"])
    assert main(args[:1] + ["--device", "h200_sxm"] + args[1:]) == 0
    h200 = json.loads(capsys.readouterr().out)
    assert {r["parallel"] for r in h200["rows"]} == {
        "TP=1 | PP=1 | DP=8 | EP=8 | MoE-TP=1 | MoE-DP=1",
        "TP=8 | PP=1 | DP=1 | EP=8 | MoE-TP=1 | MoE-DP=1",
    }


@pytest.mark.slow
def test_optimize_deepseek_16_h200_lists_only_legal_layouts(capsys):
    import json

    from simcast.cli.main import main

    assert (
        main(
            [
                "optimize",
                "--device",
                "h200_sxm",
                "--input-length",
                "1024",
                "--output-length",
                "128",
                "--num-devices",
                "16",
                "--tp-sizes",
                "8",
                "16",
                "--pp-sizes",
                "1",
                "2",
                "--ep-sizes",
                "8",
                "16",
                "--batch-sizes",
                "16",
                "--json",
                "deepseek-ai/DeepSeek-V3",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    for r in out["rows"]:
        tp, pp, dp, ep, mtp, mdp = (r[k] for k in ("tp", "pp", "dp", "ep", "moe_tp", "moe_dp"))
        assert 16 % (tp * pp) == 0 and dp == 16 // (tp * pp) and 16 % ep == 0 and ep * mtp * mdp == 16 // pp
    assert any("stage-local" in r["reason"] for r in out["rejected"])  # pp 2, ep 16: 8 ranks per stage

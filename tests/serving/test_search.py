"""Optimizer: flag contract, search-space filter, SLO filtering, serving physics, golden output."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.search.layouts import SearchSpace, check_space, resolve_search_sizes, search
from simcast.serving.steady.model import ServingConfig, Workload, estimate_serving
from simcast.sim.simulate import simulate

HERE = Path(__file__).parents[1]
DEV = str(HERE / "data" / "golden_device.yaml")


def test_resolve_search_sizes_contract():
    assert resolve_search_sizes(None, 8, 1, "--pp-sizes") == [1]  # absent -> [1]
    assert resolve_search_sizes(None, 8, None, "--tp-sizes") == [1, 2, 4, 8]  # absent tp -> powers of two
    assert resolve_search_sizes([], 8, 1, "--pp-sizes") == [1, 2, 4, 8]  # flag, no value
    assert resolve_search_sizes([], 12, 1, "--pp-sizes") == [1, 2, 4, 8]
    assert resolve_search_sizes([4, 2, 2], 8, 1, "--pp-sizes") == [2, 4]
    with pytest.raises(SimcastInputError, match="--pp-sizes: got 16; each value must be an integer in 1..8"):
        resolve_search_sizes([16], 8, 1, "--pp-sizes")


def test_search_space_filter():
    sp = SearchSpace(tp_sizes=(1, 2, 4, 8), pp_sizes=(1, 2, 4), num_devices=8)
    lay = sp.layouts()
    assert all(8 % (tp * pp) == 0 and dp == 8 // (tp * pp) for tp, pp, dp in lay)
    assert (2, 2, 2) in lay and (4, 2, 1) in lay and (8, 2, 1) not in lay and (4, 4, 1) not in lay
    with pytest.raises(SimcastInputError, match="no combination divides --num-devices=6"):
        check_space(SearchSpace(tp_sizes=(4,), pp_sizes=(4,), num_devices=6))


def _opt(args, capsys):
    rc = main(["optimize"] + args)
    out = capsys.readouterr()
    return rc, out.out, out.err


BASE = ["--device", DEV, "--num-devices", "4", "--input-length", "1024", "--output-length", "256"]


def test_cli_flag_contract(capsys):
    rc, out, _ = _opt(BASE + ["--tp-sizes", "1", "2", "--json", "Qwen/Qwen3-0.6B"], capsys)
    d = json.loads(out)
    assert rc == 0 and {r["pp"] for r in d["rows"]} == {1}  # --pp-sizes absent -> pp 1 only
    rc, out, _ = _opt(BASE + ["--tp-sizes", "1", "--pp-sizes", "--json", "Qwen/Qwen3-0.6B"], capsys)
    assert {r["pp"] for r in json.loads(out)["rows"]} == {1, 2, 4}  # empty flag -> powers of two <= 4
    rc, _, err = _opt(
        [
            "--device",
            DEV,
            "--num-devices",
            "6",
            "--input-length",
            "8",
            "--output-length",
            "8",
            "--tp-sizes",
            "4",
            "--pp-sizes",
            "4",
            "Qwen/Qwen3-0.6B",
        ],
        capsys,
    )
    assert rc == 2 and "no combination divides --num-devices=6" in err and err.count("\n") == 1
    rc, _, err = _opt(BASE + ["--pp-sizes", "0", "Qwen/Qwen3-0.6B"], capsys)
    assert rc == 2 and "--pp-sizes: got '0'; each value must be a positive integer" in err
    rc, out, _ = _opt(BASE + ["--tp-sizes", "2", "--pp-sizes", "2", "Qwen/Qwen3-0.6B", "--json"], capsys)
    pts = json.loads(out)["rows"]
    assert rc == 0 and {r["parallel"] for r in pts} == {"TP=2 | PP=2 | DP=1"}
    assert len(pts) > 1 and sum(r["best"] for r in pts) == 1  # the whole curve, one chosen point


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_golden_optimize_output(capsys, tmp_path):
    csv = tmp_path / "rows.csv"
    rc, out, err = _opt(
        BASE
        + [
            "--tp-sizes",
            "1",
            "2",
            "4",
            "--pp-sizes",
            "1",
            "2",
            "--tpot-limit",
            "8",
            "--show-rejected",
            "--csv",
            str(csv),
            "Qwen/Qwen3-0.6B",
        ],
        capsys,
    )
    assert rc == 0
    golden = HERE / "golden" / "optimize_qwen3_0.6b.txt"
    import os

    if os.environ.get("SIMCAST_UPDATE_GOLDEN"):
        golden.write_text(out)
    assert out == golden.read_text()
    import pandas as pd

    df = pd.read_csv(csv)
    assert list(df.columns[:11]) == [
        "parallel",
        "tp",
        "pp",
        "dp",
        "batch_size",
        "concurrency",
        "ttft_ms",
        "tpot_ms",
        "tokens_per_s",
        "tokens_per_s_per_device",
        "tokens_per_s_per_user",
    ]
    ok, best = df[df["meets_limits"]], df[df["best"]]
    assert (ok["tpot_ms"] <= 8.0).all() and (df[~df["meets_limits"]]["tpot_ms"] > 8.0).all()
    assert best["tokens_per_s_per_device"].is_monotonic_decreasing
    assert df.groupby("parallel").size().min() > 1  # every layout keeps its whole concurrency sweep
    # pareto: no point meeting the limits beats a frontier point in both token/s/user and token/s/device
    for _, f in ok[ok["pareto"]].iterrows():
        assert not (
            (ok["tokens_per_s_per_user"] >= f["tokens_per_s_per_user"])
            & (ok["tokens_per_s_per_device"] >= f["tokens_per_s_per_device"])
            & (
                (ok["tokens_per_s_per_user"] > f["tokens_per_s_per_user"])
                | (ok["tokens_per_s_per_device"] > f["tokens_per_s_per_device"])
            )
        ).any()
    assert ok["pareto"].any() and not df[~df["meets_limits"]]["pareto"].any()


@pytest.fixture(scope="module")
def base70b():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("meta-llama/Llama-3.1-70B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(tp=8),
            engine="vllm",
        ),
        workload=Workload(input_length=2048, output_length=512),
        batch_size=16,
    )


def test_tp8_beats_tp4_pp2_on_tpot_in_one_nvlink_node(base70b):
    tp8 = estimate_serving(base70b)
    tp4pp2 = estimate_serving(base70b.redeployed(parallel=ParallelSpec(tp=4, pp=2)))
    assert tp8.tpot_s < tp4pp2.tpot_s and tp8.ttft_s < tp4pp2.ttft_s


@pytest.mark.slow
def test_ttft_grows_with_isl_and_memory_falls_with_pp(base70b):
    ttft = [
        estimate_serving(replace(base70b, workload=Workload(input_length=n, output_length=128))).ttft_s
        for n in (512, 2048, 8192)
    ]
    assert ttft == sorted(ttft) and ttft[0] < ttft[-1]
    mem = [
        max(estimate_serving(base70b.redeployed(parallel=ParallelSpec(tp=2, pp=pp))).memory.stage_total_bytes)
        for pp in (1, 2, 4)
    ]
    assert mem[0] > mem[1] > mem[2]


@pytest.mark.slow
def test_pp_helps_when_tp_crosses_nodes(base70b):
    # 16 GPUs in nodes of 8: TP16 all-reduces over InfiniBand; TP8 x PP2 keeps TP inside the node
    m = base70b.redeployed(model=load_model("meta-llama/Llama-3.1-405B"))
    tp16 = estimate_serving(m.redeployed(parallel=ParallelSpec(tp=16)))
    tp8pp2 = estimate_serving(m.redeployed(parallel=ParallelSpec(tp=8, pp=2)))
    assert tp8pp2.tpot_s < tp16.tpot_s
    from simcast.serving.search.layouts import layout_links

    assert layout_links(m.redeployed(parallel=ParallelSpec(tp=16))) == "TP:inter PP:-"
    assert layout_links(m.redeployed(parallel=ParallelSpec(tp=8, pp=2))) == "TP:intra PP:inter"


@pytest.mark.slow
def test_slo_filtering_and_rejections(base70b):
    sp = SearchSpace(tp_sizes=(4, 8), pp_sizes=(1, 2), num_devices=8, tpot_limit_s=0.030)
    rows, rejected = search(base70b, sp)
    assert rows and all(r.result.tpot_s <= 0.030 for r in rows)
    free, _ = search(base70b, replace(sp, tpot_limit_s=float("inf")))
    best = {r.result.config.parallel: r.result.config.batch_size for r in free}
    assert all(r.result.config.batch_size <= best[r.result.config.parallel] for r in rows)
    _, rej = search(base70b, replace(sp, tpot_limit_s=0.001))
    assert rej and all("violates TPOT" in r.reason or "illegal split" in r.reason for r in rej)
    assert sum("violates TPOT" in r.reason for r in rej) == 3
    _, rej = search(base70b, SearchSpace(tp_sizes=(1,), pp_sizes=(1,), num_devices=1))
    assert "does not fit" in rej[0].reason
    # the quoted budget is the engine's share of HBM (vLLM: gpu_memory_utilization x total), not the
    # layout's own need: 70B bf16 weights (~131 GiB) on one 80 GB H100 -> budget 0.9 x 79.6 GiB
    pol, hbm = base70b.policy, base70b.device.hbm_bytes
    assert pol.mem_fraction_of == "total"
    assert f"> budget {pol.mem_fraction * hbm / 2**30:.1f} GiB" in rej[0].reason


def test_pp1_row_identical_to_plain_simulation(base70b):
    r = estimate_serving(base70b.redeployed(parallel=ParallelSpec(tp=8)))
    plain = simulate(
        SimSpec(
            model=base70b.model,
            device=base70b.device,
            parallel=ParallelSpec(tp=8),
            batch=Batch.decode(16, 2048 + 256),
            num_microbatches=1,
            engine=base70b.kernel_engine,  # serving costs with its engine's kernels
        )
    )
    assert r.decode.latency_s == plain.latency_s
    assert r.decode_cycle_s == pytest.approx(plain.latency_s + r.step_overhead_s)
    assert r.decode.runtime.send_recv_events == () and r.decode.breakdown["bubble"] == 0.0


def test_service_yaml_precedence_and_errors(tmp_path, capsys):
    y = tmp_path / "svc.yaml"
    y.write_text((HERE.parent / "examples" / "llama3.1-70b_h100_tp4_pp2.yaml").read_text())
    rc = main(["serve-config", str(y), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["parallel"] == "TP=4 | PP=2 | DP=1" and d["batch_size"] == 64 and d["fits"]
    rc = main(["serve-config", str(y), "--json", "--tp", "8", "--pp", "1", "--batch", "8"])  # CLI beats YAML
    d = json.loads(capsys.readouterr().out)
    assert d["parallel"] == "TP=8 | PP=1 | DP=1" and d["batch_size"] == 8
    y.write_text(y.read_text().replace("  dp_size: 1", "  dp_size: 2"))
    assert main(["serve-config", str(y)]) == 2
    err = capsys.readouterr().err
    assert "parallel_config.world_size: got 8; must equal tp_size*pp_size*dp_size = 4*2*2 = 16" in err
    y.write_text(y.read_text().replace("  dp_size: 2", "  dp_size: 1\n  ep_size: 2"))
    assert main(["serve-config", str(y)]) == 2  # a dense model has no experts to split
    assert "parallel_config.ep_size: got '2/1'; meta-llama/Llama-3.1-70B has no experts" in capsys.readouterr().err
    y.write_text(y.read_text().replace("  ep_size: 2", "  cp_size: 2"))
    assert main(["serve-config", str(y)]) == 2
    assert "parallel_config.cp_size: got 'cp_size'; unknown key" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_golden_emit_launch_commands(capsys, engine):
    """--emit: per ranked layout, the server command with the layout and the chosen point's batch, and the
    matching vllm bench serve line (concurrency = batch x DP); golden text on the shipped golden device."""
    rc, out, _ = _opt(
        BASE
        + [
            "--tp-sizes",
            "1",
            "2",
            "--pp-sizes",
            "1",
            "2",
            "--tpot-limit",
            "8",
            "--top",
            "3",
            "--engine",
            engine,
            "--emit",
            engine,
            "Qwen/Qwen3-0.6B",
        ],
        capsys,
    )
    assert rc == 0
    golden = HERE / "golden" / f"optimize_emit_{engine}_qwen3_0.6b.txt"
    import os

    if os.environ.get("SIMCAST_UPDATE_GOLDEN"):
        golden.write_text(out)
    assert out == golden.read_text()
    rc, js, _ = _opt(
        BASE
        + [
            "--tp-sizes",
            "1",
            "2",
            "--pp-sizes",
            "1",
            "2",
            "--tpot-limit",
            "8",
            "--top",
            "3",
            "--engine",
            engine,
            "--emit",
            engine,
            "Qwen/Qwen3-0.6B",
            "--json",
        ],
        capsys,
    )
    d = json.loads(js)
    best = {r["parallel"]: r for r in d["rows"] if r["best"]}
    assert len(d["launch"]) == 3
    for ll in d["launch"]:
        r = best[ll["parallel"]]
        seqs = "--max-num-seqs" if engine == "vllm" else "--max-running-requests"
        assert f"{seqs} {r['concurrency'] // r['dp']} " in ll["server"]
        assert ll["bench"].endswith(f"--max-concurrency {r['concurrency']}")
        assert "--random-input-len 1024 --random-output-len 256" in ll["bench"] and not ll["notes"]


def test_emit_moe_expert_parallel():
    """MoE layouts with EP > 1: vLLM gets --enable-expert-parallel (a note if its TP x DP span differs
    from simcast's EP), SGLang --enable-dp-attention and --ep-size; a dense or EP=1 layout gets neither."""
    from simcast.render.launch import launch_lines

    moe = ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-30B-A3B"),
            device=load_device(DEV),
            parallel=ParallelSpec(tp=2, dp=2, ep=4),
            engine="vllm",
        ),
        workload=Workload(input_length=512, output_length=64),
        batch_size=8,
    )
    v = launch_lines(moe, "vllm", 16)
    assert v.server.endswith("--enable-expert-parallel") and "--data-parallel-size 2 --max-num-seqs 8 " in v.server
    assert not v.notes  # EP 4 = TP 2 x DP 2: vLLM's expert span matches
    s = launch_lines(moe, "sglang", 16)
    # the MoE layer spans TP x DP: SGLang's DP attention, --tp-size counting all 4 GPUs, limits x dp
    assert "--tp-size 4 --pp-size 1 --dp-size 2 --max-running-requests 16 " in s.server
    assert "--ep-size 4" in s.server
    assert "--enable-dp-attention" in s.server and not s.problems
    assert s.notes and "sglang" in s.notes[0]  # searched with vllm's step model: said so
    dense = launch_lines(moe.redeployed(parallel=ParallelSpec(tp=2, dp=2)), "vllm", 16)
    assert "expert" not in dense.server


@pytest.mark.slow
def test_golden_optimize_moe_labels_aligned(capsys):
    """MoE labels (``| EP=.. | MoE-TP=.. | MoE-DP=..``) are longer than the dense ones: the breakdown and
    rejected lines pad to the longest label, so prefill/decode and the reasons start in one column."""
    rc, out, err = _opt(
        BASE
        + [
            "--tp-sizes",
            "1",
            "--pp-sizes",
            "1",
            "2",
            "--ep-sizes",
            "1",
            "4",
            "--tpot-limit",
            "20",
            "--show-rejected",
            "Qwen/Qwen3-30B-A3B",
        ],
        capsys,
    )
    assert rc == 0
    golden = HERE / "golden" / "optimize_qwen3_30b_a3b_moe.txt"
    import os

    if os.environ.get("SIMCAST_UPDATE_GOLDEN"):
        golden.write_text(out)
    assert out == golden.read_text()
    lines = out.splitlines()
    bd = lines[lines.index("breakdowns (% of op time | PP shares of step latency):") + 1 : lines.index("rejected:") - 1]
    assert len(bd) == 2 * 3  # three layouts fit, two lines each
    assert len({ln.index("prefill:") if "prefill:" in ln else ln.index("decode:") for ln in bd}) == 1
    assert bd[0].startswith(" 1 TP=1 | PP=1 | DP=4 | EP=4 | MoE-TP=1 | MoE-DP=1 prefill: ")  # full label, one space
    rej = lines[lines.index("rejected:") + 1 : lines.index("assumptions:") - 1]
    assert rej and len({ln.index("illegal split") for ln in rej}) == 1

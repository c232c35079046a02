"""Engine kernels beyond one op: the profile schema's ranges under YAML key names, serving costing its steps
with the kernels of the engine it schedules for (fallbacks labelled), request groups in the engine attention
path, the GEMM family of quantised linears, and the calibration counts after --from-db rewrote some lines."""

import dataclasses
import json
from dataclasses import replace

import pytest

from simcast.cli.main import main
from simcast.core.assumption import Topic, of_topic
from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.kernels import engine_cost
from simcast.cost.ops.compute import gemm_family
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, profiles_dir
from simcast.render.assumption_text import assumption_lines, assumption_text
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, estimate_serving
from simcast.sim.simulate import simulate
from simcast.trace.ir import OpRecord, TensorArg

GEMM = (
    "{dtype: bf16, matmul: 0.8, half_m: 1, half_n: 1, half_k: 1, wave_exp: 0, memory: 0.8, split_k_elems: 512, "
    "parallel_exp: 0, l2_boost: 0, l2_half_bytes: 1.0e+6, smooth_p: 4, launch_s: 3.0e-6, sm_count: 304}"
)


def _profile(tmp_path, gemm=GEMM, extra=""):
    text = (profiles_dir() / "ascend_910b.yaml").read_text().replace("name: ascend_910b", "name: p")
    path = tmp_path / "p.yaml"
    path.write_text(text + f"engines:\n  vllm:\n    source: synthetic\n    gemm:\n      - {gemm}\n{extra}")
    return str(path)


@pytest.mark.parametrize(
    "old,new,needle",
    [
        ("matmul: 0.8,", "matmul: 1.5,", "engines.vllm.gemm[0].matmul: got 1.5; must be in [0.001, 1]"),
        ("dtype: bf16", "dtype: int4", "engines.vllm.gemm[0].dtype: got 'int4'; allowed: bf16, fp16, fp8, fp8_block"),
        ("smooth_p: 4", "smooth_p: 0.5", "engines.vllm.gemm[0].smooth_p: got 0.5; must be in [1, 64]"),
        ("sm_count: 304", "sm_count: 0", "engines.vllm.gemm[0].sm_count: got 0"),
        ("launch_s: 3.0e-6", "launch_s: -1.0e-6", "engines.vllm.gemm[0].launch_s"),
    ],
)
def test_engine_fit_ranges_are_checked_under_yaml_key_names(tmp_path, capsys, old, new, needle):
    path = _profile(tmp_path, GEMM.replace(old, new))
    with pytest.raises(SimcastInputError) as e:
        load_device(path)
    assert needle in str(e.value)
    rc = main(["kernel", "gemm", "--device", path, "--m", "8", "--n", "8", "--k", "8", "--engine", "vllm"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "engines.vllm.gemm[0]" in err  # one line, no traceback


def test_engine_all_reduce_regime_keys_are_checked(tmp_path):
    bad = "    all_reduce:\n      - {kind: all_gather, gpus: 8, latency_s: 1.0e-5, bus_bw_bytes_per_s: 1.0e+11}\n"
    with pytest.raises(SimcastInputError, match=r"engines\.vllm\.all_reduce\[0\]\.kind"):
        load_device(_profile(tmp_path, extra=bad))
    neg = bad.replace("all_gather", "all_reduce").replace("}", ", max_bytes: -1}")
    with pytest.raises(SimcastInputError, match=r"engines\.vllm\.all_reduce\[0\]\.max_bytes"):
        load_device(_profile(tmp_path, extra=neg))


# ------------------------------------------------------------------ serving uses its engine's kernels
def _cfg(model, device, runtime):
    return ServingConfig(
        deployment=Deployment(model=model, device=device, parallel=ParallelSpec(tp=2), engine=runtime),
        workload=Workload(input_length=512, output_length=64),
        batch_size=8,
    )


@pytest.mark.parametrize("runtime,engine", [("trtllm", "trtllm"), ("sglang", "sglang"), ("none", None)])
def test_serving_steps_are_simulated_with_the_engine_s_kernels(qwen06b, h100, runtime, engine):
    cfg = _cfg(qwen06b, h100, runtime)
    batch = Batch.decode(8, 600)
    step = coster_for(cfg).report(batch)
    plain = simulate(SimSpec(model=qwen06b, device=h100, parallel=ParallelSpec(tp=2), batch=batch, engine=engine))
    assert step.latency_s == plain.latency_s
    res = estimate_serving(cfg)
    if engine is None:
        assert "generic roofline (--engine none" in " ".join(assumption_lines(res.assumptions))
    else:
        assert f"engine {engine} kernels on h100_sxm: gemm {engine} fit" in " ".join(assumption_lines(res.assumptions))


def test_serving_falls_back_to_the_nearest_engine_and_says_so(qwen06b, h100):
    dev = replace(h100, engines={"sglang": h100.engines["sglang"]})  # a profile fitted for SGLang only
    res = estimate_serving(_cfg(qwen06b, dev, "vllm"))
    line = assumption_text(of_topic(res.assumptions, Topic.ENGINE_KERNELS)[0])
    assert "gemm sglang fit (fallback: no vllm fit on h100_sxm)" in line
    same = simulate(
        SimSpec(model=qwen06b, device=h100, parallel=ParallelSpec(tp=2), batch=Batch.decode(8, 600), engine="sglang")
    )
    assert coster_for(_cfg(qwen06b, dev, "vllm")).report(Batch.decode(8, 600)).latency_s == same.latency_s


def test_simulate_engine_none_is_the_generic_roofline(capsys):
    args = ["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--batch", "4", "--json"]
    assert main(args) == 0
    default = json.loads(capsys.readouterr().out)
    assert main([*args, "--engine", "none"]) == 0
    none = json.loads(capsys.readouterr().out)
    assert default.pop("run")["engine"] == "none" and none.pop("run")["engine"] == "none"  # run metadata: its date
    assert none == default


# ------------------------------------------------------------------ request groups, GEMM families
def test_engine_attention_weights_request_groups_like_repeated_requests(h100):
    q, c, n = (1, 1, 700), (300, 4000, 0), (5, 3, 2)
    grouped = engine_cost.attention_s(h100, "vllm", "bf16", q, c, 32, 8, 128, counts=n)
    flat_q = tuple(x for x, k in zip(q, n) for _ in range(k))
    flat_c = tuple(x for x, k in zip(c, n) for _ in range(k))
    flat = engine_cost.attention_s(h100, "vllm", "bf16", flat_q, flat_c, 32, 8, 128)
    assert grouped is not None and flat is not None
    assert grouped[0] == pytest.approx(flat[0], rel=1e-12) and grouped[1] == flat[1]


def test_gemm_family_of_linear_and_quantised_linear():
    x, w = TensorArg(shape=("8", "64"), dtype="bf16"), TensorArg(shape=("32", "64"), dtype="fp8")
    linear = OpRecord(op="linear", scope="layer0", args=(x, w, None), outputs=(x,))
    assert gemm_family(linear, "bf16") == "bf16"
    for fmt, family in (("fp8", "fp8"), ("fp8_block", "fp8_block"), ("mxfp4", None)):
        rec = OpRecord(op="simcast::quant_linear", scope="layer0", args=(x, w, fmt), outputs=(x,))
        assert gemm_family(rec, "fp8") == family  # mxfp4 (w4a16) has no fitted family: generic roofline
    experts = OpRecord(op="simcast::moe_experts", scope="layer0", args=(x,), outputs=(x,))
    assert gemm_family(experts, "bf16") is None


# ------------------------------------------------------------------ provenance counts
@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_recount_after_from_db_replaced_carried_lines():
    from simcast.calib.profiles import profile_notes as pn
    from simcast.calib.profiles import profile_yaml as py
    from simcast.calib.profiles.profile_doc import dump_doc, load_doc
    from simcast.inputs.files import loads_yaml

    text = (profiles_dir() / "b200.yaml").read_text()
    block = loads_yaml(text, "b200")["calibration"]
    doc = load_doc(text, "b200")
    assert pn.count_fitted(doc) == block["fitted_parameters"] == block["from_db"]["fitted_parameters"] > 0
    assert pn.carried_counts(doc) == (block["carried_over_parameters"], block["carried_over_fitted_on_source"])
    stale = load_doc(text.replace(f"fitted_parameters: {block['fitted_parameters']}\n", "fitted_parameters: 99\n"), "x")
    py.recount_calibration(stale)
    assert dump_doc(stale) == text


def test_vidur_link_fit_replaces_only_its_group_size(h100):
    import pandas as pd

    from simcast.calib.fitting.fit import fit_links
    from simcast.core.device import CollectiveFit

    regimes = tuple(
        CollectiveFit(kind="all_reduce", gpus=g, latency_s=1e-5, bus_bw_bytes_per_s=b, max_bytes=m, algorithm=a)
        for g in (4, 8)
        for b, m, a in ((1e11, 2**20, "nccl_small"), (4e11, 0.0, "nccl_large"))
    )
    dev = dataclasses.replace(
        h100, links=dataclasses.replace(h100.links, intra_node=replace(h100.links.intra_node, collectives=regimes))
    )
    sizes = [2**k for k in range(16, 26)]
    rows = pd.DataFrame(
        {"kind": "allreduce", "bytes": sizes, "gpus": 8, "nodes": 1, "time_s": [2e-5 + s / 3e11 for s in sizes]}
    )
    links, errors = fit_links(rows, dev)
    got = links.intra_node.collectives
    assert [f.algorithm for f in got if f.gpus == 4] == ["nccl_small", "nccl_large"]  # untouched
    eight = [f for f in got if f.gpus == 8]
    assert len(eight) == 1 and eight[0].max_bytes == 0 and "intra_node.all_reduce.8" in errors

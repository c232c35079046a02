"""Request-length distributions: the sampler (hand-checked), the shipped files (means, provenance), and
bench-serve's --dataset-name / --dataset-path / --sharegpt-output-len and `simcast workloads`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.core.lengths import LengthDistribution
from simcast.inputs.workloads import load_shipped, shipped_workloads
from simcast.serving.request_level.simulate import make_requests, requests_from_lengths

SHIPPED = ["arxiv_summarization", "azure_code_2023", "azure_conv_2023", "bwb", "lmsys_chat_1m", "sharegpt"]
TWO = LengthDistribution(name="two", weights=(3.0, 1.0), input_tokens=(100, 1000), output_tokens=(10, 50))
"""P(100, 10) = 3/4, P(1000, 50) = 1/4: E[in] = 75 + 250 = 325, E[out] = 7.5 + 12.5 = 20."""


def test_two_point_distribution_by_hand():
    p, i, o = TWO.support()
    assert p.tolist() == [0.75, 0.25] and i.tolist() == [100, 1000] and o.tolist() == [10, 50]
    assert TWO.mean_input_tokens == 325.0 and TWO.mean_output_tokens == 20.0 and TWO.mean_total_tokens == 345.0
    assert TWO.quantile(0.5) == 100 and TWO.quantile(0.75) == 100 and TWO.quantile(0.76) == 1000
    assert TWO.quantile(0.9, "output") == 50 and TWO.quantile(0.0, "total") == 110 and TWO.quantile(1.0) == 1000
    ins, outs = TWO.sample(40_000, np.random.default_rng(0))
    assert ins.dtype == np.int64 and set(ins.tolist()) == {100, 1000}
    assert ((ins == 100) == (outs == 10)).all()  # pairs stay joint
    share = float((ins == 1000).mean())
    assert abs(share - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 40_000)  # 4 sigma


def test_sampling_is_deterministic_by_seed():
    a = TWO.sample(100, np.random.default_rng(7))
    b = TWO.sample(100, np.random.default_rng(7))
    c = TWO.sample(100, np.random.default_rng(8))
    assert all((x == y).all() for x, y in zip(a, b)) and not (a[0] == c[0]).all()
    r1 = make_requests(num_prompts=50, rate=5.0, seed=3, lengths=TWO)
    assert r1 == make_requests(num_prompts=50, rate=5.0, seed=3, lengths=TWO)
    assert r1 != make_requests(num_prompts=50, rate=5.0, seed=4, lengths=TWO)
    assert r1[0].arrival_s == 0.0 and 0 < r1[-1].arrival_s < 50 / 5.0  # the arrival process of the random dataset


def test_output_override_drops_points_over_the_cap():
    d = LengthDistribution(
        name="capped", weights=(1.0, 1.0), input_tokens=(100, 1900), output_tokens=(5, 5), max_total_tokens=2048
    )
    o = d.with_output_tokens(200)  # 1900 + 200 > 2048: dropped, as vLLM's filter drops it
    assert o.input_tokens == (100,) and o.output_tokens == (200,) and o.mean_output_tokens == 200.0
    assert TWO.with_output_tokens(7).output_tokens == (7, 7)  # no cap: every point kept
    with pytest.raises(SimcastInputError, match="sharegpt-output-len"):
        d.with_output_tokens(5000)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(weights=(), input_tokens=(), output_tokens=()), "at least one"),
        (dict(weights=(1.0,), input_tokens=(0,), output_tokens=(1,)), "input tokens"),
        (dict(weights=(-1.0,), input_tokens=(1,), output_tokens=(1,)), "weights"),
        (dict(weights=(1.0, 1.0), input_tokens=(1,), output_tokens=(1,)), "one per weight"),
    ],
)
def test_bad_distribution_refused(kw, match):
    with pytest.raises(SimcastInputError, match=match):
        LengthDistribution(name="bad", **kw)


def test_shipped_names():
    assert shipped_workloads() == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_means_match_the_source_within_2pct(name):
    """The histogram's expectations and a large seeded sample reproduce the source's own means (measured on
    every source row by scripts/derive_workloads.py) within 2 %; quantiles within a histogram cell."""
    w = load_shipped(name)
    d, s = w.distribution, w.source_stats
    for got, want in (
        (d.mean_input_tokens, s["input_tokens"]["mean"]),
        (d.mean_output_tokens, s["output_tokens"]["mean"]),
    ):
        assert abs(got / want - 1) < 0.002, (name, got, want)  # cell means keep the mean to rounding
    ins, outs = d.sample(200_000, np.random.default_rng(0))
    assert abs(ins.mean() / s["input_tokens"]["mean"] - 1) < 0.02
    assert abs(outs.mean() / s["output_tokens"]["mean"] - 1) < 0.02
    cell = 2**0.25  # the derivation's 4 cells per octave
    for of, key in (("input", "input_tokens"), ("output", "output_tokens")):
        for q, stat in ((0.5, "median"), (0.9, "p90")):
            if s[key][stat] is None:  # an approximation from summary statistics: the source gives no quantile
                assert d.provenance.get("approximation"), (name, of, stat)
                continue
            assert 1 / cell <= d.quantile(q, of) / s[key][stat] <= cell, (name, of, stat)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_provenance_present(name):
    w = load_shipped(name)
    prov = w.distribution.provenance
    approx = prov.get("approximation")
    for k in ("source", "tokenizer", "filters", "rows", "derived_by") + (() if approx else ("source_sha256",)):
        assert prov.get(k), (name, k)
    assert not approx or approx.startswith("approximation from summary statistics")
    assert prov["rows"] == sum(int(x) for x in w.distribution.weights)  # every source row is in one cell
    assert len(w.distribution.weights) <= 2000  # a small summary, not the source


def test_sharegpt_carries_vllms_filter():
    d = load_shipped("sharegpt").distribution
    _, i, o = d.support()
    assert d.max_total_tokens == 2048 and i.min() >= 4 and o.min() >= 4 and i.max() <= 1024
    assert (i + o).max() <= 2048


def test_requests_from_lengths_takes_rows_in_order_then_oversamples():
    r = requests_from_lengths([10, 20, 30], [1, 2, 3], num_prompts=2, rate=math.inf)
    assert [(x.input_len, x.output_len) for x in r] == [(10, 1), (20, 2)]
    r = requests_from_lengths([10, 20, 30], [1, 2, 3], num_prompts=10, rate=math.inf, seed=1)
    assert [x.input_len for x in r[:3]] == [10, 20, 30] and all(x.input_len // 10 == x.output_len for x in r)


BENCH = ["bench-serve", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--num-prompts", "50"]


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_bench_serve_sharegpt(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(BENCH + ["--dataset-name", "sharegpt", "--request-rate", "10", "--save-result", str(out)]) == 0
    d = json.loads(out.read_text())
    want = make_requests(num_prompts=50, rate=10.0, lengths=load_shipped("sharegpt").distribution)
    assert d["completed"] == 50 and d["total_input_tokens"] == sum(r.input_len for r in want)
    assert d["total_output_tokens"] == sum(r.output_len for r in want)
    assert any("shipped sharegpt distribution" in a for a in d["assumptions"])
    capsys.readouterr()
    assert main(BENCH + ["--dataset-name", "sharegpt", "--sharegpt-output-len", "16"]) == 0
    assert "Total generated tokens:                 800" in capsys.readouterr().out


def test_bench_serve_random_default_is_unchanged(tmp_path):
    out = tmp_path / "r.json"
    assert main(BENCH + ["--random-input-len", "64", "--random-output-len", "8", "--save-result", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["total_input_tokens"] == 50 * 64 and d["total_output_tokens"] == 50 * 8
    assert not any("request lengths" in a for a in d["assumptions"])


def test_bench_serve_dataset_path_lengths_only(tmp_path, capsys):
    """Vidur-style columns, no arrival times: the rows in order at --request-rate."""
    p = tmp_path / "t.csv"
    p.write_text("num_prefill_tokens,num_decode_tokens\n100,5\n200,7\n")
    assert main(BENCH + ["--dataset-path", str(p), "--num-prompts", "2", "--request-rate", "4"]) == 0
    assert "Total generated tokens:                 12" in capsys.readouterr().out
    j = tmp_path / "t.jsonl"
    j.write_text(
        '{"input_len": 100, "output_len": 5, "arrival_s": 0}\n{"input_len": 200, "output_len": 7, "arrival_s": 1}\n'
    )
    assert main(BENCH + ["--dataset-path", str(j), "--sharegpt-output-len", "3"]) == 0  # replayed, output 3
    assert "Total generated tokens:                 6" in capsys.readouterr().out
    j.write_text('{"input_len": 100, "output_len": 5}\n{"input_len": 200, "output_len": 7, "arrival_s": 1}\n')
    assert main(BENCH + ["--dataset-path", str(j)]) == 2  # arrival times on some rows only
    assert "arrival_s, line 1" in capsys.readouterr().err


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_workloads_command(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    for name in SHIPPED:
        assert name in out
    assert "221.0" in out  # sharegpt's mean prompt (Llama-3 tokens)
    assert main(["workloads", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["workloads"]
    assert doc["run"]["simcast_version"] and doc["run"]["date_utc"].endswith("Z")
    assert [r["name"] for r in rows] == SHIPPED and all(r["provenance"]["source"] for r in rows)


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--dataset-name", "nope"], ["--dataset-name", "sharegpt"]),
        (["--dataset-name", "custom"], ["--dataset-path"]),
        (["--sharegpt-output-len", "8"], ["--sharegpt-output-len", "random"]),
        (["--dataset-name", "sharegpt", "--sharegpt-output-len", "5000"], ["2048"]),
        (["--dataset-name", "sharegpt", "--dataset-path", "ShareGPT_V3.json"], ["--dataset-path"]),
        (["--dataset-path", "ShareGPT_V3.json"], [".jsonl or .csv"]),
        (["--sharegpt-output-len", "0"], ["--sharegpt-output-len"]),
    ],
)
def test_bad_dataset_flags_one_line(capsys, args, needles):
    try:
        rc = main(BENCH + args)
    except SystemExit as e:  # argparse's own check (a bounded flag type)
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("simcast: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


def test_bad_trace_columns(tmp_path, capsys):
    p = tmp_path / "t.csv"
    p.write_text("prompt,completion\n1,2\n")
    assert main(BENCH + ["--dataset-path", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "input_len" in err and "num_prefill_tokens" in err, err

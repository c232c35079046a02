"""The one-call API (``simcast.simulate_step``, ``optimize``, ``bench_serve``) is the CLI's code path:
the same inputs give the same numbers through both, and every result has ``to_dict``/``to_dataframe``."""

from __future__ import annotations

import dataclasses
import json

import pytest

import simcast
from simcast.cli.main import main


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def _plain(d: object) -> object:
    """``d`` as JSON gives it back (tuples as lists, NaN-free floats exact)."""
    return json.loads(json.dumps(d))


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_simulate_step_equals_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    cli = _cli_json(
        [
            "simulate",
            "--model",
            "Qwen/Qwen3-0.6B",
            "--device",
            "h100_sxm",
            "--tp",
            "2",
            "--pp",
            "2",
            "--batch",
            "4",
            "--input-length",
            "256",
            "--json",
        ],
        capsys,
    )
    cli.pop("run")
    r = simcast.simulate_step(model="Qwen/Qwen3-0.6B", device="h100_sxm", tp=2, pp=2, batch_size=4, input_length=256)
    assert isinstance(r, simcast.Report)
    assert _plain(r.to_dict()) == {**cli, "traces_compiled": r.traces_compiled}
    df = r.to_dataframe()
    assert list(df.stage_id) == [0, 1]
    assert df.stage_ms.sum() == pytest.approx(sum(s.stage_s for s in r.stages) * 1e3)
    assert {"compute_ms", "weights_gib", "kv_cache_gib"} <= set(df.columns)


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_simulate_step_takes_spec_objects(qwen06b, h100) -> None:
    a = simcast.simulate_step(model=qwen06b, device=h100, pp=2, phase="decode", batch_size=8, input_length=512)
    b = simcast.simulate_step(
        model="Qwen/Qwen3-0.6B", device="h100_sxm", pp=2, phase="decode", batch_size=8, input_length=512
    )
    assert a.latency_s == b.latency_s > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.traces_compiled = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"tp": 0}, "--tp"),
        ({"batch_size": 10**9}, "--batch"),
        ({"phase": "train"}, "--phase"),
        ({"model": 3}, "model"),
        ({"dp": 2, "num_devices": 3}, "--num-devices"),
    ],
)
def test_simulate_step_refuses_bad_input(kwargs: dict, field: str) -> None:
    args = {"model": "Qwen/Qwen3-0.6B", "device": "h100_sxm", **kwargs}
    with pytest.raises(simcast.SimcastInputError) as e:
        simcast.simulate_step(**args)
    assert e.value.field == field


def test_search_row_fields_are_the_csv_columns() -> None:
    from simcast.render.search_tables import COLUMNS

    assert sorted(f.name for f in dataclasses.fields(simcast.SearchRow)) == sorted(COLUMNS)


def _optimize_case(capsys: pytest.CaptureFixture[str], flags: list[str], **kwargs: object) -> None:
    cli = _cli_json(["optimize", *flags, "--json"], capsys)
    res = simcast.optimize(**kwargs)  # type: ignore[arg-type]
    d = _plain(res.to_dict())
    assert d["rows"] == cli["rows"]
    assert d["rejected"] == cli["rejected"]
    df = res.to_dataframe()
    assert df.to_dict(orient="records") == [dataclasses.asdict(r) for r in res.rows]
    best = res.best()
    assert best and all(r.best for r in best)
    assert [r.parallel for r in best] == [row["parallel"] for row in cli["rows"] if row["best"]]
    ranked = [r.tokens_per_s_per_device for r in best]
    assert ranked == sorted(ranked, reverse=True)


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_optimize_equals_the_cli_small(capsys: pytest.CaptureFixture[str]) -> None:
    _optimize_case(
        capsys,
        [
            "--model",
            "Qwen/Qwen3-0.6B",
            "--device",
            "h100_sxm",
            "--num-devices",
            "2",
            "--input-length",
            "512",
            "--output-length",
            "64",
            "--tp-sizes",
            "1",
            "2",
            "--batch-sizes",
            "1",
            "8",
            "--tpot-limit",
            "50",
        ],
        model="Qwen/Qwen3-0.6B",
        device="h100_sxm",
        num_devices=2,
        input_length=512,
        output_length=64,
        tp_sizes=[1, 2],
        batch_sizes=[1, 8],
        tpot_limit_ms=50,
    )


@pytest.mark.slow
def test_optimize_equals_the_cli_on_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    """The Makefile's ``make demo`` search (``DEMO_SEARCH``: its flags, then its keywords)."""
    from simcast.api.search_inputs import DEMO_MODEL, DEMO_SEARCH, demo_flags

    _optimize_case(capsys, [*demo_flags(), DEMO_MODEL], model=DEMO_MODEL, **DEMO_SEARCH)


def test_optimize_refuses_bad_input() -> None:
    with pytest.raises(simcast.SimcastInputError) as e:
        simcast.optimize(model="Qwen/Qwen3-0.6B", device="h100_sxm", num_devices=2, input_length=512)
    assert e.value.field == "--input-length/--output-length"
    with pytest.raises(simcast.SimcastInputError) as e:
        simcast.optimize(
            model="Qwen/Qwen3-0.6B",
            device="h100_sxm",
            num_devices=2,
            input_length=512,
            output_length=64,
            gpu_memory_utilization=0.8,
            mem_fraction_static=0.8,
        )
    assert "memory fraction" in str(e.value)


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_bench_serve_equals_the_cli(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.json"
    flags = [
        "bench-serve",
        "--model",
        "Qwen/Qwen3-0.6B",
        "--device",
        "h100_sxm",
        "--tp",
        "1",
        "--num-prompts",
        "60",
        "--request-rate",
        "20",
        "--random-input-len",
        "512",
        "--random-output-len",
        "32",
        "--random-range-ratio",
        "0.2",
        "--seed",
        "3",
        "--save-result",
        str(path),
    ]
    assert main(flags) == 0
    capsys.readouterr()
    cli = json.loads(path.read_text())
    cli.pop("run")
    res = simcast.bench_serve(
        model="Qwen/Qwen3-0.6B",
        device="h100_sxm",
        tp=1,
        num_prompts=60,
        request_rate=20,
        input_length=512,
        output_length=32,
        range_ratio=0.2,
        seed=3,
    )
    assert _plain(res.to_dict()) == cli
    assert res.output_throughput_tok_s == cli["output_throughput"] > 0
    df = res.to_dataframe()
    assert len(df) == 60 and {"ttft_s", "e2e_s", "tpot_s", "input_len"} <= set(df.columns)
    assert df.ttft_s.median() * 1e3 == pytest.approx(res.median_ttft_ms)


def test_bench_serve_refuses_bad_input() -> None:
    with pytest.raises(simcast.SimcastInputError) as e:
        simcast.bench_serve(model="Qwen/Qwen3-0.6B", device="h100_sxm", request_rate=-1.0)
    assert e.value.field == "--request-rate"


SPEC = {"method": "eagle3", "num_speculative_tokens": 2}


@pytest.mark.slow  # ~1 s or more: out of make test-fast
def test_simulate_step_speculative_equals_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """The verify step and the draft's block (``--json``'s ``speculative``) through both; SGLang's spelling
    gives the same step as vLLM's."""
    flags = ["--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--phase", "decode", "--batch", "8"]
    cli = _cli_json(
        ["simulate", *flags, "--speculative-config", json.dumps(SPEC), "--spec-acceptance", "0.7", "--json"], capsys
    )
    cli.pop("run")
    kw = {"model": "Qwen/Qwen3-0.6B", "device": "h100_sxm", "phase": "decode", "batch_size": 8}
    r = simcast.simulate_step(**kw, speculative_config=SPEC, spec_acceptance=0.7)  # type: ignore[arg-type]
    assert _plain(r.to_dict()) == {**cli, "traces_compiled": r.traces_compiled}
    assert r.speculative is not None and r.speculative["num_speculative_tokens"] == 2
    assert r.speculative["step_ms"] == pytest.approx(r.latency_s * 1e3 + r.speculative["draft_ms"])
    s = simcast.simulate_step(**kw, speculative_algorithm="EAGLE3", speculative_num_steps=2, spec_acceptance=[0.7])  # type: ignore[arg-type]
    assert s.latency_s == r.latency_s and s.speculative is not None
    assert s.speculative["step_ms"] == r.speculative["step_ms"]
    plain = simcast.simulate_step(**kw)  # type: ignore[arg-type]
    assert plain.speculative is None and "speculative" not in plain.to_dict()
    assert r.latency_s > plain.latency_s  # 3 query tokens per request in the verify step, not 1


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_optimize_main_features_equal_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """Chunk search, prefix hit rate, prefix caching off and speculative decoding through both."""
    base = ["--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--num-devices", "2"]
    base += ["--input-length", "4096", "--output-length", "64", "--tp-sizes", "1", "--pp-sizes", "1", "2"]
    base += ["--batch-sizes", "1", "8", "--engine", "sglang"]
    kw = dict(
        model="Qwen/Qwen3-0.6B",
        device="h100_sxm",
        num_devices=2,
        input_length=4096,
        output_length=64,
        tp_sizes=[1],
        pp_sizes=[1, 2],
        batch_sizes=[1, 8],
        engine="sglang",
    )
    _optimize_case(
        capsys,
        [*base, "--chunked-prefill-sizes", "1024", "2048", "--prefix-hit-rate", "0.5"],
        **kw,
        chunked_prefill_sizes=[1024, 2048],
        prefix_hit_rate=0.5,
    )
    res = simcast.optimize(**kw, chunked_prefill_sizes=[1024, 2048])  # type: ignore[arg-type]
    own = res.config.policy.max_num_batched_tokens  # the engine's own chunk is tried too
    assert {r.chunk_tokens for r in res.best()} <= {1024, 2048, own}
    assert all(c.chunk_choices for c in res.candidates)
    _optimize_case(
        capsys,
        [*base, "--disable-radix-cache", "--speculative-algorithm", "EAGLE3"]  # a hit rate with caching off: exit 2
        + ["--speculative-num-steps", "2", "--spec-acceptance", "0.7"],
        **kw,
        prefix_caching=False,
        speculative_algorithm="EAGLE3",
        speculative_num_steps=2,
        spec_acceptance="0.7",
    )


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"prefix_hit_rate": 1.0}, "--prefix-hit-rate"),
        ({"chunked_prefill_sizes": [0]}, "--chunked-prefill-sizes"),
        ({"chunked_prefill_sizes": [1] * 17}, "--chunked-prefill-sizes"),
        ({"spec_acceptance": 2.0, "speculative_config": SPEC}, "--spec-acceptance"),
        ({"spec_acceptance": 0.7}, "--spec-acceptance"),
        ({"speculative_num_steps": 0, "speculative_algorithm": "EAGLE"}, "--speculative-num-steps"),
        ({"speculative_config": SPEC, "speculative_algorithm": "EAGLE"}, "--speculative-config"),
        ({"prefix_caching": "yes"}, "--enable-prefix-caching"),
    ],
)
def test_optimize_refuses_bad_new_options(kwargs: dict, field: str) -> None:
    args = {"model": "Qwen/Qwen3-0.6B", "device": "h100_sxm", "num_devices": 1, "input_length": 512}
    with pytest.raises(simcast.SimcastInputError) as e:
        simcast.optimize(**args, output_length=64, **kwargs)
    assert e.value.field == field


@pytest.mark.parametrize(
    "flags, kwargs",
    [
        (
            ["--random-prefix-len", "256", "--speculative-config", json.dumps(SPEC), "--spec-acceptance", "0.6"],
            {"prefix_length": 256, "speculative_config": SPEC, "spec_acceptance": 0.6},
        ),
        (
            ["--dataset-name", "multiturn", "--multiturn-turns", "3", "--no-enable-prefix-caching"],
            {"dataset_name": "multiturn", "multiturn_turns": 3, "prefix_caching": False},
        ),
        (
            ["--engine", "sglang", "--pp", "2", "--chunked-prefill-size", "256", "--enable-dynamic-chunking"],
            {"engine": "sglang", "pp": 2, "max_num_batched_tokens": 256, "enable_dynamic_chunking": True},
        ),
    ],
)
@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_bench_serve_main_features_equal_the_cli(tmp_path, capsys, flags: list[str], kwargs: dict) -> None:
    path = tmp_path / "r.json"
    common = ["--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--num-prompts", "24", "--request-rate", "8"]
    common += ["--random-input-len", "512", "--random-output-len", "16", "--seed", "1"]
    assert main(["bench-serve", *common, *flags, "--save-result", str(path)]) == 0
    capsys.readouterr()
    cli = json.loads(path.read_text())
    cli.pop("run")
    res = simcast.bench_serve(
        model="Qwen/Qwen3-0.6B",
        device="h100_sxm",
        num_prompts=24,
        request_rate=8,
        input_length=512,
        output_length=16,
        seed=1,
        **kwargs,
    )
    assert _plain(res.to_dict()) == cli
    assert res.output_throughput_tok_s > 0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"prefix_length": -1}, "--random-prefix-len"),
        ({"multiturn_turns": 2}, "--multiturn-turns"),
        ({"dynamic_chunking_smooth_factor": 2.0}, "--dynamic-chunking-smooth-factor"),
        ({"enable_dynamic_chunking": True}, "--enable-dynamic-chunking"),
    ],
)
def test_bench_serve_refuses_bad_new_options(kwargs: dict, field: str) -> None:
    with pytest.raises(simcast.SimcastInputError) as e:
        simcast.bench_serve(model="Qwen/Qwen3-0.6B", device="h100_sxm", num_prompts=4, **kwargs)
    assert e.value.field == field

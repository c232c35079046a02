"""simcast calibrate-serving: the fit recovers known CPU overheads, labels what it could not fit, refuses
bad run files in one line, and its engine profile changes what every serving result says."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from simcast.calib.serving_fit.overhead_fit import fit_overheads
from simcast.calib.serving_fit.run_model import RunModel, RunPrediction
from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines import get_engine
from simcast.engines.policy import engine_policy
from simcast.inputs.bench_results import MeasuredRun, read_run_file
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.engine_profile import profile_text, read_engine_profile
from simcast.serving.steady.model import ServingConfig, Workload

HERE = Path(__file__).parents[1]
DEV = str(HERE / "data" / "golden_device.yaml")
MODEL = "Qwen/Qwen3-0.6B"
A_TRUE, B_TRUE = 3e-3, 10e-6  # s per step, s per request in the step
PAR = {"parallel_config": {"tp_size": 1}}  # a service YAML's required section
TRUTH = {
    "engine": "vllm",
    "step_overhead_s": A_TRUE,
    "per_request_overhead_s": B_TRUE,
    "overhead_source": "assumption: the synthetic truth of this test",
    "front_end_s": 0.02,  # a 20 ms serving path (the engine default is 6 ms): calibrate-serving must find it
}


def _run(**kw) -> MeasuredRun:
    base = dict(
        source="x",
        concurrency=0,
        request_rate_per_s=math.inf,
        burstiness=1.0,
        num_requests=0,
        input_len=512,
        output_len=32,
        ttft_s=None,
        tpot_s=None,
        output_tokens_per_s=None,
    )
    return MeasuredRun(**{**base, **kw})


# ------------------------------------------------------------------ the fit on a hand-computable model
class LinearModel:
    """A serial engine with fixed step shapes: TPOT = gpu + a + b * n (what simcast's step model reduces to)."""

    def __init__(self, gpu_s: dict[str, float], n: dict[str, int], overlap: bool = False):
        self.gpu, self.n, self.overlap = gpu_s, n, overlap

    def predict(self, run, a, b):
        cpu = a + b * self.n[run.source]
        t = max(self.gpu[run.source], cpu) if self.overlap else self.gpu[run.source] + cpu
        return RunPrediction(method="linear", ttft_s=t, tpot_s=t, output_tokens_per_s=self.n[run.source] / t)


def test_fit_recovers_a_and_b_from_two_concurrencies_hand_computed():
    # TPOT = gpu + 3 ms + 10 us * n: n = 4 -> 1 + 3 + 0.04 = 4.04 ms; n = 64 -> 2 + 3 + 0.64 = 5.64 ms
    m = LinearModel({"c4": 1e-3, "c64": 2e-3}, {"c4": 4, "c64": 64})
    runs = [_run(source="c4", tpot_s=4.04e-3), _run(source="c64", tpot_s=5.64e-3)]
    fit = fit_overheads(m, runs, start=engine_policy("vllm", load_device(DEV)))
    assert fit.fitted == ("step_overhead_s", "per_request_overhead_s") and not fit.not_fitted
    assert fit.step_overhead_s == pytest.approx(3e-3, rel=1e-4)
    assert fit.per_request_overhead_s == pytest.approx(10e-6, rel=1e-3)
    assert fit.rms_error_pct < 1e-3


def test_one_concurrency_fits_a_only_with_b_at_the_assumption_hand_computed():
    # b stays at vLLM's assumed 5 us, so a = 4.04 - 1 - 0.005 * 4 = 3.02 ms reproduces the TPOT exactly
    m = LinearModel({"c4": 1e-3}, {"c4": 4})
    fit = fit_overheads(m, [_run(source="c4", tpot_s=4.04e-3)], start=engine_policy("vllm", load_device(DEV)))
    assert fit.fitted == ("step_overhead_s",)
    assert fit.not_fitted[0][0] == "per_request_overhead_s" and "cannot be separated" in fit.not_fitted[0][1]
    assert fit.per_request_overhead_s == get_engine("vllm").record.per_request_overhead_s == 5e-6
    assert fit.step_overhead_s == pytest.approx(3.02e-3, rel=1e-4)


def test_cpu_hidden_behind_the_gpu_is_not_fitted():
    # overlap: step = max(gpu, cpu) = gpu 10 ms at any plausible CPU time below it: nothing to fit
    m = LinearModel({"c4": 10e-3, "c64": 10e-3}, {"c4": 4, "c64": 64}, overlap=True)
    start = engine_policy("sglang", load_device(DEV))
    runs = [_run(source="c4", tpot_s=10e-3), _run(source="c64", tpot_s=10e-3)]
    fit = fit_overheads(m, runs, start=start)
    assert fit.fitted == ()
    assert "hidden behind the GPU" in fit.not_fitted[0][1]
    assert (fit.step_overhead_s, fit.per_request_overhead_s) == (start.step_overhead_s, start.per_request_overhead_s)


# ------------------------------------------------------------------ round trips through simcast's own simulators
@pytest.fixture(scope="module")
def truth_yaml(tmp_path_factory):
    p = tmp_path_factory.mktemp("truth") / "truth.yaml"
    p.write_text(yaml.safe_dump(TRUTH))
    return str(p)


def _bench(tmp: Path, truth: str, conc: int, capsys) -> str:
    out = str(tmp / f"c{conc}.json")
    argv = ["bench-serve", "--model", MODEL, "--device", DEV, "--engine-profile", truth]
    argv += ["--num-prompts", str(6 * conc), "--random-input-len", "512", "--random-output-len", "32"]
    assert main(argv + ["--max-concurrency", str(conc), "--save-result", out]) == 0
    capsys.readouterr()
    return out


def test_round_trip_bench_serve_json_recovers_a_and_b(tmp_path, truth_yaml, capsys):
    files = [_bench(tmp_path, truth_yaml, c, capsys) for c in (4, 32)]
    out = tmp_path / "engine.yaml"
    assert main(["calibrate-serving", *files, "--model", MODEL, "--device", DEV, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fitted: step_overhead_s = " in text and "not fitted:" not in text
    prof = yaml.safe_load(out.read_text())
    assert prof["step_overhead_s"] == pytest.approx(A_TRUE, rel=0.02)
    assert prof["per_request_overhead_s"] == pytest.approx(B_TRUE, rel=0.03)
    assert prof["provenance"]["fitted"] == ["step_overhead_s", "per_request_overhead_s", "front_end_s"]
    assert prof["front_end_s"] == pytest.approx(0.02, rel=0.02)  # the serving path, from the TTFT residual
    assert prof["front_end_source"].startswith("fitted: ")
    assert [f["name"] for f in prof["provenance"]["files"]] == ["c4.json", "c32.json"]
    assert prof["provenance"]["files"][0]["sha256"] == read_run_file(files[0]).sha256
    assert prof["overhead_source"].startswith("fitted: step_overhead_s 3 ms, per_request_overhead_s 10 us")
    # the unfitted fields are vLLM's defaults on this device, copied
    dflt = engine_policy("vllm", load_device(DEV))
    assert prof["max_num_seqs"] == dflt.max_num_seqs and prof["overlap_cpu"] is dflt.overlap_cpu


def test_round_trip_steady_state_csv_recovers_a_and_b(tmp_path, capsys):
    """CSV rows made by the steady-state estimate at the true overheads, fitted back with it."""
    dev = load_device(DEV)
    base = ServingConfig(
        deployment=Deployment(model=load_model(MODEL), device=dev, parallel=ParallelSpec(), engine="vllm"),
        workload=Workload(input_length=1, output_length=1),
        batch_size=1,
    )
    truth = replace(base.policy, step_overhead_s=A_TRUE, per_request_overhead_s=B_TRUE)
    gen = RunModel(replace(base, engine_profile=truth))
    rows = ["concurrency,input_len,output_len,ttft_ms,tpot_ms,output_throughput"]
    for c in (2, 16, 64):
        p = gen.predict(_run(source=f"c{c}", concurrency=c, input_len=1024, output_len=128, tpot_s=1.0), A_TRUE, B_TRUE)
        rows.append(f"{c},1024,128,{p.ttft_s * 1e3!r},{p.tpot_s * 1e3!r},{p.output_tokens_per_s!r}")
    csv = tmp_path / "sweep.csv"
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "engine.yaml"
    assert main(["calibrate-serving", str(csv), "--model", MODEL, "--device", DEV, "--out", str(out)]) == 0
    assert "steady state, 16/replica" in capsys.readouterr().out
    prof = yaml.safe_load(out.read_text())
    assert prof["step_overhead_s"] == pytest.approx(A_TRUE, rel=0.02)
    assert prof["per_request_overhead_s"] == pytest.approx(B_TRUE, rel=0.03)


def test_one_concurrency_file_fits_a_only_and_labels_b_as_the_assumption(tmp_path, truth_yaml, capsys):
    f = _bench(tmp_path, truth_yaml, 16, capsys)
    out = tmp_path / "engine.yaml"
    assert main(["calibrate-serving", f, "--model", MODEL, "--device", DEV, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "not fitted: per_request_overhead_s = 5 us kept from the starting profile: cannot be separated" in text
    prof = yaml.safe_load(out.read_text())
    assert prof["provenance"]["fitted"] == ["step_overhead_s", "front_end_s"]  # TTFT measured: the serving path too
    assert prof["per_request_overhead_s"] == get_engine("vllm").record.per_request_overhead_s
    label = prof["overhead_source"]
    assert label.startswith("fitted: step_overhead_s ")
    assert "per_request_overhead_s 5 us not fitted (cannot be separated" in label
    assert label.endswith("kept: " + get_engine("vllm").record.cpu_source)
    # a absorbs the per-request time b cannot: a + 5 us * n = 3 ms + 10 us * n with n ~ 16 requests per step
    assert A_TRUE < prof["step_overhead_s"] < A_TRUE + 16 * (B_TRUE - 5e-6) * 1.2


# ------------------------------------------------------------------ the profile is used everywhere
def test_profile_round_trips_and_changes_the_printed_assumption(tmp_path, capsys):
    dev = load_device(DEV)
    fitted = replace(engine_policy("vllm", dev), step_overhead_s=3e-3, overhead_source="fitted: by this test")
    p = tmp_path / "engine.yaml"
    p.write_text(profile_text(fitted, {"fitted": ["step_overhead_s"]}))
    assert read_engine_profile(str(p), dev) == fitted
    svc = {
        "model": MODEL,
        "device": DEV,
        "workload": {"input_length": 512, "output_length": 32, "batch_size": 8},
        "parallel_config": {"tp_size": 1},
    }
    (tmp_path / "svc.yaml").write_text(yaml.safe_dump(svc))
    assert main(["serve-config", str(tmp_path / "svc.yaml")]) == 0
    plain = capsys.readouterr().out
    assert "— assumption: ~2 ms CPU per step" in plain
    assert main(["serve-config", str(tmp_path / "svc.yaml"), "--engine-profile", str(p)]) == 0
    used = capsys.readouterr().out
    assert "CPU 3 ms/step + 5 us/request (serial with the GPU) — fitted: by this test" in used
    assert "assumption: ~2 ms" not in used
    (tmp_path / "svc2.yaml").write_text(yaml.safe_dump({**svc, "engine_profile": str(p)}))  # the YAML key
    assert main(["serve-config", str(tmp_path / "svc2.yaml")]) == 0
    assert capsys.readouterr().out == used
    args = ["--device", DEV, "--num-devices", "1", "--input-length", "512", "--output-length", "32"]
    assert main(["optimize", *args, "--batch-sizes", "8", "--engine-profile", str(p), MODEL]) == 0
    assert "— fitted: by this test" in capsys.readouterr().out


def test_profile_for_another_engine_is_refused(tmp_path, capsys):
    p = tmp_path / "sglang.yaml"
    p.write_text(yaml.safe_dump({**TRUTH, "engine": "sglang"}))
    svc = {"model": MODEL, "device": DEV, "workload": {"input_length": 64, "output_length": 8}, **PAR}
    (tmp_path / "svc.yaml").write_text(yaml.safe_dump({**svc, "runtime": "vllm", "engine_profile": str(p)}))
    assert main(["serve-config", str(tmp_path / "svc.yaml")]) == 2
    assert "runtime: got 'vllm'; the engine profile sglang.yaml is for engine sglang" in capsys.readouterr().err
    (tmp_path / "svc.yaml").write_text(yaml.safe_dump({**svc, "engine_profile": str(p)}))  # no runtime: the profile's
    assert main(["serve-config", str(tmp_path / "svc.yaml")]) == 0
    assert "engine sglang (server):" in capsys.readouterr().out


# ------------------------------------------------------------------ bad input: one line, exit 2
GOOD_RUN = {
    "num_prompts": 8,
    "request_rate": "inf",
    "burstiness": 1.0,
    "max_concurrency": 4,
    "completed": 8,
    "total_input_tokens": 4096,
    "total_output_tokens": 256,
    "output_throughput": 800.0,
    "mean_ttft_ms": 10.0,
    "mean_tpot_ms": 4.5,
}


@pytest.mark.parametrize(
    "name, content, expect",
    [
        ("missing.json", {k: v for k, v in GOOD_RUN.items() if k != "completed"}, "completed: got None; is required"),
        ("nan.json", '{"completed": NaN}', "is not valid: NaN is not a finite number"),
        ("negative.json", {**GOOD_RUN, "mean_tpot_ms": -4.5}, "mean_tpot_ms: got -4.5; must be in [0, 1e+09]"),
        ("zero.json", {**GOOD_RUN, "output_throughput": 0}, "output_throughput: got 0; must be in [0.001, 1e+12]"),
        ("rate.json", {**GOOD_RUN, "request_rate": "fast"}, "request_rate: got 'fast'; must be a number"),
        ("text.json", "this is not json", "is not valid JSON"),
        ("list.json", [1, 2], "must be a JSON object"),
        ("nothing.json", {**GOOD_RUN, "mean_tpot_ms": None, "output_throughput": None}, "needs a measured TPOT"),
        ("empty.csv", "", "is empty; expected a header line and data rows"),
        ("header.csv", "concurrency,input_len,output_len,tpot_ms\n", "has a header"),
        ("typo.csv", "concurrency,input_len,output_len,tpot\n4,512,32,4.5\n", "column tpot: got None; allowed:"),
        ("cell.csv", "concurrency,input_len,output_len,tpot_ms\n4,512,32,-1\n", "column tpot_ms, line 2: got '-1'"),
        ("nometric.csv", "concurrency,input_len,output_len,ttft_ms\n4,512,32,9\n", "needs a measured TPOT"),
    ],
)
def test_bad_run_files_exit_2_with_one_line(tmp_path, capsys, name, content, expect):
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    code = main(["calibrate-serving", str(p), "--model", MODEL, "--device", DEV, "--out", str(tmp_path / "e.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("simcast: error: "), err
    assert expect in err
    assert not (tmp_path / "e.yaml").exists()


def test_missing_file_and_bad_out_path_exit_2(tmp_path, capsys):
    code = main(
        ["calibrate-serving", str(tmp_path / "nope.json"), "--model", MODEL, "--device", DEV, "--out", "x.yaml"]
    )
    assert code == 2 and "cannot be read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["calibrate-serving", "a.json", "--model", MODEL, "--device", DEV, "--out", str(tmp_path / "e.txt")])
    assert e.value.code == 2 and "must end in .yaml, .yml" in capsys.readouterr().err


@pytest.mark.parametrize(
    "doc, expect",
    [
        ({**TRUTH, "step_overhead_s": -1e-3}, "step_overhead_s: got -0.001; must be in [0, 1]"),
        ({**TRUTH, "step_overhead_s": 2.0}, "step_overhead_s: got 2.0; must be in [0, 1]"),
        ({**TRUTH, "per_request_overhead_s": ".nan"}, "must be a finite number"),
        ({**TRUTH, "engine": "tgi"}, "engine: got 'tgi'; allowed: vllm, sglang, trtllm, none"),
        ({**TRUTH, "mem_fraction_of": "half"}, "mem_fraction_of: got 'half'; allowed: total, static, free"),
        ({**TRUTH, "speed": 3}, "speed: got 'speed'; unknown key"),
        ({k: v for k, v in TRUTH.items() if k != "overhead_source"}, "overhead_source: got None; is required"),
        ({**TRUTH, "max_num_seqs": 0}, "max_num_seqs: got 0; must be an integer in [1, 1000000]"),
    ],
)
def test_bad_engine_profile_exits_2_naming_the_key(tmp_path, capsys, doc, expect):
    p = tmp_path / "engine.yaml"
    text = yaml.safe_dump(doc).replace("'.nan'", ".nan")
    p.write_text(text)
    svc = {"model": MODEL, "device": DEV, "workload": {"input_length": 64, "output_length": 8}, **PAR}
    (tmp_path / "svc.yaml").write_text(yaml.safe_dump(svc))
    assert main(["serve-config", str(tmp_path / "svc.yaml"), "--engine-profile", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err, err


def test_read_run_file_reads_vllm_keys_and_units(tmp_path):
    p = tmp_path / "run.json"
    p.write_text(json.dumps({**GOOD_RUN, "model_id": MODEL, "request_rate": 2.5, "max_concurrency": None}))
    (run,) = read_run_file(str(p)).runs
    assert (run.input_len, run.output_len, run.num_requests) == (512, 32, 8)  # 4096 / 8, 256 / 8
    assert (run.tpot_s, run.ttft_s, run.output_tokens_per_s) == (4.5e-3, 10e-3, 800.0)
    assert (run.request_rate_per_s, run.concurrency, run.model_id) == (2.5, 0, MODEL)
    single = tmp_path / "one.json"  # one-token outputs: vLLM writes TPOT 0, which means "undefined"
    single.write_text(json.dumps({**GOOD_RUN, "total_output_tokens": 8, "mean_tpot_ms": 0.0}))
    assert read_run_file(str(single)).runs[0].tpot_s is None
    with pytest.raises(SimcastInputError, match=r"must be >= 0.001 ms \(1 us\) when outputs have 2 or more tokens"):
        p.write_text(json.dumps({**GOOD_RUN, "mean_tpot_ms": 0.0}))
        read_run_file(str(p))


# ------------------------------------------------------------------ the fit's cost does not grow with its evaluations
@pytest.mark.parametrize("range_ratio", [0.0, 0.3])
def test_closed_loop_replay_is_recorded_once_and_retimed_exactly(monkeypatch, range_ratio):
    """A run sent at rate inf to one replica is replayed once, then re-timed for every trial (a, b): the
    predictions equal a full replay's bit for bit (200 requests at concurrency 1 took 172 s of replays)."""
    import simcast.calib.serving_fit.run_model as of

    base = ServingConfig(
        deployment=Deployment(model=load_model(MODEL), device=load_device(DEV), parallel=ParallelSpec(), engine="vllm"),
        workload=Workload(input_length=1, output_length=1),
        batch_size=1,
    )
    runs = [
        _run(source="c1", concurrency=1, num_requests=10, input_len=700, output_len=24, tpot_s=4e-3),
        _run(source="c4", concurrency=4, num_requests=16, input_len=300, output_len=16, tpot_s=4e-3),
        _run(source="open", concurrency=0, num_requests=8, input_len=200, output_len=8, tpot_s=4e-3),
    ]
    replays: list[int] = []
    real = of.simulate_requests
    monkeypatch.setattr(of, "simulate_requests", lambda *a, **k: replays.append(1) or real(*a, **k))
    trials = [(0.0, 0.0), (2e-3, 5e-6), (7e-3, 40e-6), (1e-4, 1e-3)]
    model = RunModel(base, range_ratio=range_ratio)
    fast = [model.predict(r, a, b) for a, b in trials for r in runs]
    assert len(replays) == len(runs)  # one replay per run, whatever the number of evaluations
    monkeypatch.setattr(of, "time_invariant", lambda *a: False)
    full = [RunModel(base, range_ratio=range_ratio).predict(r, a, b) for a, b in trials for r in runs]
    assert len(replays) == len(runs) * (1 + len(trials))
    assert fast == full  # exactly: the re-timing does the replay's floating-point operations


def test_runs_at_a_finite_rate_are_replayed_in_full(monkeypatch):
    """Arrivals over time: the step times decide what a step carries, so each evaluation replays (stated)."""
    import simcast.calib.serving_fit.run_model as of

    base = ServingConfig(
        deployment=Deployment(model=load_model(MODEL), device=load_device(DEV), parallel=ParallelSpec(), engine="vllm"),
        workload=Workload(input_length=1, output_length=1),
        batch_size=1,
    )
    replays: list[int] = []
    real = of.simulate_requests
    monkeypatch.setattr(of, "simulate_requests", lambda *a, **k: replays.append(1) or real(*a, **k))
    run = _run(source="r", request_rate_per_s=50.0, num_requests=8, input_len=200, output_len=8, tpot_s=4e-3)
    model = RunModel(base)
    model.predict(run, 1e-3, 0.0)
    model.predict(run, 2e-3, 0.0)
    assert len(replays) == 2

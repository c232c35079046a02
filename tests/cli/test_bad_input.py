"""Every defect of issue 8's "tried as a new user would" list: exit 2, one line on stderr, no traceback,
nothing half-written, fast. Each test fails on the code before the hardening (kept as a regression test)."""

from __future__ import annotations

import json
import resource
import signal
from pathlib import Path

import pytest
from conftest import time_limit

from simcast.cli.main import main
from simcast.core.errors import SimcastInputError

HERE = Path(__file__).parents[1]
DEV = str(HERE / "data" / "golden_device.yaml")
GOOD_DEVICE = (HERE / "data" / "golden_device.yaml").read_text()
MODEL = "Qwen/Qwen3-0.6B"
QWEN_CONFIG = json.loads((HERE.parent / "models" / "Qwen" / "Qwen3-0.6B" / "config.json").read_text())
MIXTRAL_CONFIG = json.loads((HERE.parent / "models" / "mistralai" / "Mixtral-8x7B-v0.1" / "config.json").read_text())
LLAMA_CONFIG = json.loads((HERE.parent / "models" / "meta-llama" / "Llama-3.2-1B" / "config.json").read_text())
SERVICE = """model: Qwen/Qwen3-0.6B
device: {dev}
workload:
  input_length: 512
  output_length: 128
  batch_size: 4
parallel_config:
  tp_size: 1
  pp_size: 1
"""


def run(args, capsys, seconds: int = 120):
    with time_limit(seconds):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:  # argparse errors exit from inside parse_args
            rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def bad(args, capsys, *needles: str, seconds: int = 30) -> str:
    """Assert the one-line contract and return the line."""
    rc, _, err = run(args, capsys, seconds)
    assert rc == 2, err
    assert err.startswith("simcast: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert len(err) < 1200, err[:300]  # the quoted value is bounded
    for n in needles:
        assert n in err, err
    return err


def write(tmp_path, name, data) -> str:
    p = tmp_path / name
    p.write_bytes(data) if isinstance(data, bytes) else p.write_text(data)
    return str(p)


def service(tmp_path, text=None, **repl) -> str:
    text = text or SERVICE.format(dev=DEV)
    for k, v in repl.items():
        text = text.replace(k, v)
    return write(tmp_path, "svc.yaml", text)


def profile(tmp_path, old, new) -> str:
    assert old in GOOD_DEVICE
    return write(tmp_path, "golden_device.yaml", GOOD_DEVICE.replace(old, new))


def config(tmp_path, base=QWEN_CONFIG, **kv) -> str:
    cfg = {**base, **kv}
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def gemm(device):
    return ["kernel", "gemm", "--device", device, "--m", 64, "--n", 64, "--k", 64]


# ------------------------------------------------------------------ measured CSVs for calibrate / validate
GEMM_CSV = (
    "kind,dtype,m,n,k,time_s\n"
    + "\n".join(
        f"gemm,bf16,{m},{n},{k},{t}"
        for m, n, k, t in [
            (16, 4096, 4096, 2.0e-5),
            (128, 4096, 4096, 2.4e-5),
            (1024, 4096, 4096, 9.0e-5),
            (4096, 4096, 4096, 3.2e-4),
            (256, 14336, 4096, 1.1e-4),
            (2048, 4096, 14336, 5.2e-4),
            (64, 1024, 1024, 8.0e-6),
            (512, 8192, 8192, 4.2e-4),
        ]
    )
    + "\n"
)


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_calibrate_gemm_only_csv_without_nodes_column_works(tmp_path, capsys):
    csv = write(tmp_path, "g.csv", GEMM_CSV)
    out = tmp_path / "h100_sxm.yaml"
    rc, stdout, err = run(["calibrate", csv, "--device", "h100_sxm", "--out", out], capsys)
    assert rc == 0, err
    assert out.is_file() and "wrote" in stdout
    from simcast.inputs.loaders import load_device

    assert load_device(str(out)).efficiency.matmul > 0


@pytest.mark.parametrize(
    "text,needles",
    [
        ("", ["is empty"]),
        ("kind,dtype,m,n,k,time_s\n", ["no data rows"]),
        ("kind,dtype,m,n,k,time_s\ngemm,bf16,abc,64,64,1e-5\n", ["m", "line 2", "'abc'"]),
        ("kind,dtype,m,n,k,time_s\ngemm,bf16,inf,64,64,1e-5\n", ["m", "line 2"]),
        ("kind,dtype,m,n,k,time_s\ngemm,bf16,64,64,64,1e-5\ngemm,bf16,64,64,64,x\n", ["time_s", "line 3", "'x'"]),
        ("kind,dtype,m,n,k,time_s\ngemm,bf16,64,64,64,-1e-5\n", ["time_s", "line 2", "must be"]),
        ("kind,dtype,m,n,k,time_s\ngemm,bf16,64,64,64,0\n", ["time_s", "line 2"]),
        ("kind,dtype,m,n,k,time_s\ngemm,bf16,64,64,64,inf\n", ["time_s", "line 2"]),
        (b"kind,dtype,m,n,k,time_s\ngemm,bf16,64,64,64,\xff\xfe\n", ["UTF-8"]),
    ],
)
@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_bad_measured_csv_is_one_line(tmp_path, capsys, command, text, needles):
    csv = write(tmp_path, "m.csv", text)
    out = tmp_path / "h100_sxm.yaml"
    args = [command, csv, "--device", "h100_sxm"] + (["--out", out] if command == "calibrate" else [])
    err = bad(args, capsys, *needles)
    assert "efficiency.matmul" not in err  # a bad time is the CSV's fault, never blamed on a fitted value
    assert not out.exists()


# ------------------------------------------------------------------ YAML bombs, encoding, depth
LAUGHS = (
    "model:\n"
    + "\n".join(
        f"  - &{c} [" + ", ".join(["x"] * 10 if i == 0 else [f"*{chr(ord(c) - 1)}"] * 10) + "]"
        for i, c in enumerate("abcdefghi")
    )
    + "\n"
)


def test_billion_laughs_service_yaml_is_refused_fast(tmp_path, capsys):
    assert len(LAUGHS) < 600
    bad(["serve-config", write(tmp_path, "svc.yaml", LAUGHS)], capsys, "alias", seconds=10)


def test_billion_laughs_device_description_is_refused_fast(tmp_path, capsys):
    text = GOOD_DEVICE.replace(
        'description: "Test device with round numbers (not real hardware)"',
        LAUGHS.replace("model:", "description:").rstrip("\n"),
    )
    bad(gemm(write(tmp_path, "dev.yaml", text)), capsys, "alias", seconds=10)


def test_long_wrong_value_is_quoted_with_a_bound(tmp_path, capsys):
    text = GOOD_DEVICE.replace(
        '"Test device with round numbers (not real hardware)"', "[" + ", ".join(str(i) for i in range(20_000)) + "]"
    )
    err = bad(gemm(write(tmp_path, "dev.yaml", text)), capsys, "description")
    assert "19999" not in err


GARBAGE = bytes(range(128, 256)) * 8


@pytest.mark.parametrize("where", ["service", "profile", "config", "csv"])
def test_not_utf8_is_one_line(tmp_path, capsys, where):
    if where == "service":
        args = ["serve-config", write(tmp_path, "svc.yaml", GARBAGE)]
    elif where == "profile":
        args = gemm(write(tmp_path, "dev.yaml", GARBAGE))
    elif where == "config":
        (tmp_path / "config.json").write_bytes(GARBAGE)
        args = ["simulate", "--model", tmp_path, "--device", DEV]
    else:
        args = ["validate", write(tmp_path, "m.csv", GARBAGE), "--device", DEV]
    bad(args, capsys, "UTF-8")


@pytest.mark.parametrize("where", ["service", "profile", "config"])
def test_deep_nesting_is_one_line(tmp_path, capsys, where):
    deep = "[" * 100_000 + "]" * 100_000
    if where == "service":
        args = ["serve-config", write(tmp_path, "svc.yaml", f"model: {deep}\n")]
    elif where == "profile":
        args = gemm(write(tmp_path, "dev.yaml", f"name: {deep}\n"))
    else:
        (tmp_path / "config.json").write_text('{"architectures": ' + deep + "}")
        args = ["simulate", "--model", tmp_path, "--device", DEV]
    bad(args, capsys, "nest", seconds=10)


# ------------------------------------------------------------------ non-finite numbers
def test_nan_input_length_in_service_yaml(tmp_path, capsys):
    bad(
        ["serve-config", service(tmp_path, **{"input_length: 512": "input_length: .nan"})],
        capsys,
        "workload.input_length",
    )


@pytest.mark.parametrize(
    "old,new,field",
    [
        ("hbm_bytes: 85899345920", "hbm_bytes: .inf", "memory.hbm_bytes"),
        ("{bf16: 1.0e+15,", "{bf16: .inf,", "compute.matmul_flops_per_s.bf16"),
        ("launch_overhead_s: 5.0e-6", "launch_overhead_s: .inf", "efficiency.launch_overhead_s"),
        ("launch_overhead_s: 5.0e-6", "launch_overhead_s: 5.0e-6\n  matmul_half_n: .inf", "efficiency.matmul_half_n"),
        ("hbm_bw_bytes_per_s: 3.0e+12", "hbm_bw_bytes_per_s: .nan", "memory.hbm_bw_bytes_per_s"),
        ("latency_s: 3.0e-6", "latency_s: -.inf", "links.intra_node.latency_s"),
    ],
)
def test_non_finite_profile_numbers(tmp_path, capsys, old, new, field):
    bad(gemm(profile(tmp_path, old, new)) + ["--json"], capsys, field)


# ------------------------------------------------------------------ sizes without an upper bound
@pytest.mark.parametrize(
    "args,flag",
    [
        (["--batch", 10**12], "--batch"),
        (["--batch", 10**8, "--phase", "decode"], "--batch"),
        (["--microbatches", 10**12], "--microbatches"),
        (["--input-length", 10**12], "--input-length"),
        (["--context-length", 10**12, "--phase", "decode"], "--context-length"),
        (["--num-devices", 10**12], "--num-devices"),
    ],
)
def test_simulate_sizes_are_bounded(capsys, args, flag):
    bad(["simulate", "--model", MODEL, "--device", DEV] + args, capsys, flag, "<=", seconds=10)


def test_optimize_batch_sizes_bounded(capsys):
    bad(
        [
            "optimize",
            "--device",
            DEV,
            "--num-devices",
            1,
            "--input-length",
            128,
            "--output-length",
            16,
            "--batch-sizes",
            10**12,
            MODEL,
        ],
        capsys,
        "--batch-sizes",
        seconds=10,
    )


@pytest.mark.parametrize(
    "args,flag",
    [
        (["allreduce", "--gpus", 10**12, "--bytes", 1e6], "--gpus"),
        (["allgather", "--gpus", 8, "--nodes", 10**12, "--bytes", 1e6], "--nodes"),
        (["allreduce", "--gpus", 8, "--bytes", 1e300], "--bytes"),
        (
            ["attention", "--phase", "decode", "--batch", 10**12, "--kv-len", 1024, "--heads", 8, "--kv-heads", 8],
            "--batch",
        ),
        (["attention", "--phase", "decode", "--kv-len", 10**12, "--heads", 8, "--kv-heads", 8], "--kv-len"),
        (["gemm", "--m", 10**12, "--n", 64, "--k", 64], "--m"),
    ],
)
def test_kernel_sizes_are_bounded(capsys, args, flag):
    bad(["kernel", args[0], "--device", DEV] + args[1:], capsys, flag, seconds=10)


def test_superscript_digit_in_tp_sizes(capsys):
    bad(
        [
            "optimize",
            "--device",
            DEV,
            "--num-devices",
            8,
            "--input-length",
            128,
            "--output-length",
            16,
            "--tp-sizes",
            "²",
            MODEL,
        ],
        capsys,
        "--tp-sizes",
        "'²'",
    )


# ------------------------------------------------------------------ output paths
def test_trace_into_a_file_parent_fails_before_the_work(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    bad(["simulate", "--model", MODEL, "--device", DEV, "--trace", tmp_path / "afile" / "t.json"], capsys, "--trace")


def test_trace_onto_a_directory(tmp_path, capsys):
    bad(["simulate", "--model", MODEL, "--device", DEV, "--trace", tmp_path], capsys, "--trace", "directory")


def test_plot_into_missing_directory(tmp_path, capsys):
    bad(["simulate", "--model", MODEL, "--device", DEV, "--plot", tmp_path / "nope" / "p.png"], capsys, "--plot")
    assert not (tmp_path / "nope").exists()


def test_trace_onto_a_device_file(capsys):
    bad(["simulate", "--model", MODEL, "--device", DEV, "--trace", "/dev/full"], capsys, "--trace")


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_disk_full_at_write_time_leaves_nothing(tmp_path, capsys):
    """A file size limit (EFBIG, like ENOSPC) hits the Chrome-trace write: one line, no partial file."""
    base = ["simulate", "--model", MODEL, "--device", DEV, "--batch", 2, "--input-length", 64]
    assert run(base, capsys)[0] == 0  # warm the trace cache: the limit must hit our write, not the cache
    old_sig = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, hard))
    try:
        rc, _, err = run(base + ["--trace", tmp_path / "t.json"], capsys)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_sig)
    assert rc == 2 and err.count("\n") == 1 and "--trace" in err, err
    assert list(tmp_path.iterdir()) == []


def test_optimize_csv_into_missing_directory_fails_before_the_search(tmp_path, capsys, monkeypatch):
    import simcast.serving.search.layouts as search

    def no_search(*a, **k):
        raise AssertionError("the search ran before the output path was checked")

    monkeypatch.setattr(search, "search", no_search)
    bad(
        [
            "optimize",
            "--device",
            DEV,
            "--num-devices",
            1,
            "--input-length",
            128,
            "--output-length",
            16,
            "--csv",
            tmp_path / "missing" / "rows.csv",
            MODEL,
        ],
        capsys,
        "--csv",
    )


def test_calibrate_out_into_missing_directory(tmp_path, capsys):
    csv = write(tmp_path, "g.csv", GEMM_CSV)
    bad(["calibrate", csv, "--device", "h100_sxm", "--out", tmp_path / "missing" / "o.yaml"], capsys, "--out")


# ------------------------------------------------------------------ YAML / config semantics
def test_service_yaml_errors_use_yaml_key_names(tmp_path, capsys):
    err = bad(
        ["serve-config", service(tmp_path, **{"input_length: 512": "input_length: 0"})],
        capsys,
        "workload.input_length: got 0",
    )
    assert "--input-length" not in err


def test_tp_size_zero_blamed_on_tp_size(tmp_path, capsys):
    err = bad(["serve-config", service(tmp_path, **{"tp_size: 1": "tp_size: 0"})], capsys, "parallel_config.tp_size")
    assert "world_size" not in err.split(";")[0]


@pytest.mark.parametrize("value", ["-5", ".nan", ".inf", "0"])
def test_bad_ttft_limit_rejected(tmp_path, capsys, value):
    bad(
        ["serve-config", service(tmp_path, SERVICE.format(dev=DEV) + f"limits: {{ttft_ms: {value}}}\n")],
        capsys,
        "limits.ttft_ms",
    )


def test_head_dim_zero_rejected(tmp_path, capsys):
    bad(["simulate", "--model", config(tmp_path, head_dim=0), "--device", DEV], capsys, "head_dim", "got 0")


@pytest.mark.parametrize(
    "base,kv,key",
    [
        (LLAMA_CONFIG, {"mlp_bias": True}, "mlp_bias"),
        (LLAMA_CONFIG, {"hidden_act": "gelu"}, "hidden_act"),
        (QWEN_CONFIG, {"hidden_act": "relu"}, "hidden_act"),
        (LLAMA_CONFIG, {"num_local_experts": 8, "num_experts_per_tok": 2}, "num_local_experts"),
        (QWEN_CONFIG, {"num_experts": 64}, "num_experts"),
        (QWEN_CONFIG, {"use_sliding_window": True, "sliding_window": 4096}, "sliding_window"),
        (MIXTRAL_CONFIG, {"sliding_window": 4096}, "sliding_window"),
        (MIXTRAL_CONFIG, {"mlp_bias": True}, "mlp_bias"),
        (MIXTRAL_CONFIG, {"num_local_experts": 10**9}, "num_local_experts"),
    ],
)
def test_unmodelled_config_keys_rejected(tmp_path, capsys, base, kv, key):
    bad(["simulate", "--model", config(tmp_path, base, **kv), "--device", DEV], capsys, f"config.json:{key}")


def test_optimize_without_limits_does_not_blame_limits(capsys):
    rc, out, err = run(
        [
            "optimize",
            "--device",
            DEV,
            "--num-devices",
            1,
            "--input-length",
            128,
            "--output-length",
            16,
            "meta-llama/Llama-3.1-405B",
        ],
        capsys,
    )
    assert rc == 3, err  # no layout: exit 3 (simcast.cli.exits), the table still printed
    assert "limits" not in out.split("assumptions:")[0] and "no legal layout" in out


# ------------------------------------------------------------------ bench-serve (request-level simulator)
BENCH = [
    "bench-serve",
    "--model",
    MODEL,
    "--device",
    DEV,
    "--num-prompts",
    4,
    "--random-input-len",
    32,
    "--random-output-len",
    4,
]


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--num-prompts", 10**12], "--num-prompts"),
        (["--random-output-len", 10**12], "--random-output-len"),
        (["--seed", -1], "--seed"),
        (["--random-range-ratio", "nan"], "--random-range-ratio"),
        (["--random-range-ratio", 1.5], "--random-range-ratio"),
        (["--request-rate", 0], "--request-rate"),
        (["--burstiness", "inf"], "--burstiness"),
        (["--max-num-seqs", 10**12], "--max-num-seqs"),
        (["--tp", "²"], "--tp"),
        (["--random-prefix-len", -1], "--random-prefix-len"),
        (["--random-prefix-len", 16, "--dataset-name", "sharegpt"], "--random-prefix-len"),
        (["--multiturn-turns", 3], "--multiturn-turns"),
        (["--multiturn-turns", 0, "--dataset-name", "multiturn"], "--multiturn-turns"),
        (["--enable-prefix-caching", "--disable-radix-cache"], "--disable-radix-cache"),
    ],
)
def test_bench_serve_flags_bounded(capsys, args, flag):
    bad(BENCH + args, capsys, flag, seconds=10)


@pytest.mark.parametrize(
    "name,text,needles",
    [
        (
            "t.jsonl",
            '{"arrival_s": 0, "input_len": 8, "output_len": 2}\n{"arrival_s": NaN, "input_len": 8, "output_len": 2}\n',
            ["--dataset"],
        ),
        ("t.jsonl", '{"arrival_s": 0, "input_len": -8, "output_len": 2}\n', ["input_len", "line 1"]),
        (
            "t.jsonl",
            '{"arrival_s": 0, "input_len": 8, "output_len": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
            ["--dataset", "nests"],
        ),
        ("t.csv", "arrival_s,input_len,output_len\n0,8,abc\n", ["output_len", "line 2", "'abc'"]),
        ("t.csv", "arrival_s,input_len,output_len\n", ["no data rows"]),
        ("t.csv", "input_len,output_len,prefix_id,prefix_len\n8,2,0,9\n", ["row 1 prefix_len", "input_len"]),
        ("t.csv", "input_len,output_len,prefix_id\n8,2,0\n", ["prefix_id", "prefix_len"]),
        ("t.csv", "input_len,output_len,prefix_id,prefix_len\n8,2,-3,4\n", ["prefix_id"]),
        ("t.csv", GARBAGE, ["UTF-8"]),
    ],
)
def test_bench_serve_bad_dataset(tmp_path, capsys, name, text, needles):
    bad(BENCH + ["--dataset", write(tmp_path, name, text)], capsys, *needles, seconds=10)


def test_bench_serve_save_result_checked_before_the_work(tmp_path, capsys, monkeypatch):
    import simcast.serving.request_level.simulate as requests

    def no_run(*a, **k):
        raise AssertionError("the simulation ran before the output path was checked")

    monkeypatch.setattr(requests, "simulate_requests", no_run)
    bad(BENCH + ["--save-result", tmp_path / "missing" / "r.json"], capsys, "--save-result")
    (tmp_path / "r.requests.csv").mkdir()  # the per-request CSV's path is a folder
    bad(BENCH + ["--save-result", tmp_path / "r.json"], capsys, "--save-result")
    assert not (tmp_path / "r.json").exists()


def test_bench_serve_result_dir_and_filename(tmp_path, capsys, monkeypatch):
    """--save-result as vLLM has it: PATH and --result-dir/--result-filename together are refused; a
    --result-dir under a regular file cannot be created; both before any work."""
    import simcast.serving.request_level.simulate as requests

    def no_run(*a, **k):
        raise AssertionError("the simulation ran before the output path was checked")

    monkeypatch.setattr(requests, "simulate_requests", no_run)
    bad(BENCH + ["--save-result", tmp_path / "r.json", "--result-dir", tmp_path], capsys, "--save-result", "not both")
    (tmp_path / "file").write_text("x")
    bad(BENCH + ["--save-result", "--result-dir", tmp_path / "file" / "sub"], capsys, "--result-dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_optimize_model_given_twice(capsys):
    args = ["optimize", "--device", "h100_sxm", "--num-devices", "1", "--input-length", "8", "--output-length", "8"]
    bad(args + ["--model", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B"], capsys, "--model", "give it once")


def test_docs_list_every_limit():
    from simcast.inputs.limits import TABLE

    doc = (HERE.parent / "docs" / "inputs.md").read_text()
    for what, bound, shown in TABLE:
        assert eval(shown.replace("^", "**")) == bound, shown  # docs/inputs.md writes the bound the code enforces
        assert f"| {what} | {shown} |" in doc, what


def test_stage_times_microbatches_bounded(tmp_path, capsys):
    """pp x microbatches is what the timeline holds (126 x 4096 took 50 s and 3 GB with --trace)."""
    bad(
        ["simulate", "--model", MODEL, "--device", DEV, "--pp", 28, "--microbatches", 4096],
        capsys,
        "--microbatches: got 4096; must be <= 2340 with --pp 28",
    )
    svc = service(tmp_path, **{"pp_size: 1": "pp_size: 28\n  microbatches: 4096"})
    bad(["serve-config", svc], capsys, "parallel_config.microbatches: got 4096")


def test_csv_rows_bounded(tmp_path, capsys, monkeypatch):
    """The row bound (10^6: under a minute of validate or calibrate), checked here at 3 rows to stay fast."""
    import simcast.inputs.files as files

    monkeypatch.setattr(files, "MAX_CSV_ROWS", 3)
    csv = write(tmp_path, "m.csv", "kind,dtype,m,n,k,time_s\n" + "gemm,bf16,64,64,64,1e-5\n" * 4)
    bad(["validate", csv, "--device", DEV], capsys, "has 4 rows; at most 3 are read")


# ================================================================== issue 18 item 8: an adversarial new user
# ------------------------------------------------------------------ hangs and unbounded work
ESCAPES = '"' + '\\"' * 60_000  # 120 KB: an unterminated string of \" (the depth scan was quadratic: > 20 s)


@pytest.mark.parametrize("where", ["config", "result", "dataset"])
def test_json_depth_scan_is_linear_on_unterminated_escapes(tmp_path, capsys, where):
    if where == "config":
        (tmp_path / "config.json").write_text('{"architectures": ' + ESCAPES)
        args = ["simulate", "--model", tmp_path, "--device", DEV]
    elif where == "result":
        res = write(tmp_path, "r.json", '{"completed": ' + ESCAPES)
        args = ["calibrate-serving", res, "--model", MODEL, "--device", DEV, "--out", tmp_path / "e.yaml"]
    else:
        args = BENCH + ["--dataset", write(tmp_path, "t.jsonl", '{"arrival_s": ' + ESCAPES + "\n")]
    bad(args, capsys, "JSON", seconds=5)


@pytest.mark.slow
def test_json_depth_scan_of_16_mib_is_seconds():
    from simcast.inputs.files import MAX_TEXT_BYTES, json_depth

    with time_limit(10):
        assert json_depth('"' + '\\"' * (MAX_TEXT_BYTES // 2 - 1)) == 0
        assert json_depth("[" * 64 + '"' + "\\[" * 1000) == 64


def test_bench_serve_steps_at_concurrency_one_bounded(capsys, monkeypatch):
    """1e5 prompts x 100 tokens at concurrency 1 are 1e7 engine steps (~4 minutes): refused before the run."""
    import simcast.serving.request_level.simulate as requests

    def no_run(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr(requests, "simulate_requests", no_run)
    args = ["bench-serve", "--model", MODEL, "--device", DEV, "--num-prompts", 100_000, "--random-input-len", 32]
    err = bad(args + ["--random-output-len", 100, "--max-concurrency", 1], capsys, "--num-prompts", "engine steps")
    assert "at most 4e+06" in err


def test_balanced_partition_bounded_by_its_work(capsys):
    """--partition balanced at PP 32 on Llama-3.1-405B ran 52-118 s (~pp^3 stage simulations per move)."""
    args = ["simulate", "--model", "meta-llama/Llama-3.1-405B", "--device", DEV, "--tp", 8, "--pp", 32]
    bad(args + ["--num-devices", 256, "--partition", "balanced"], capsys, "--partition", "at most pp 16", seconds=10)


def test_optimize_batch_sizes_count_bounded(capsys, monkeypatch):
    import simcast.serving.search.layouts as search

    monkeypatch.setattr(search, "search", lambda *a, **k: ([], []))  # 100,000 values ran 305 s
    args = ["optimize", "--device", DEV, "--num-devices", 1, "--input-length", 64, "--output-length", 8]
    bad(args + ["--batch-sizes", *range(1, 258), MODEL], capsys, "--batch-sizes", "at most 256 values")


# ------------------------------------------------------------------ security: --emit, printed names, validate
EVIL = "x; touch PWNED #\x1b[31mred\u202e"


def test_emit_quotes_every_argument_and_ignores_a_free_text_name(tmp_path, capsys, monkeypatch):
    import shlex

    folder = tmp_path / "my model; touch PWNED #"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**QWEN_CONFIG, "_name_or_path": EVIL}))
    args = ["optimize", "--device", DEV, "--num-devices", 1, "--input-length", 64, "--output-length", 8]
    rc, out, err = run(args + ["--batch-sizes", 4, "--top", 1, "--emit", "sglang", folder], capsys, seconds=60)
    assert rc == 0, err
    assert "\x1b" not in out + err and "\u202e" not in out + err and "touch PWNED #" not in out.replace(str(folder), "")
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith(("python -m sglang", "vllm bench"))]
    assert len(lines) == 2
    server, bench = (shlex.split(ln) for ln in lines)
    assert server[server.index("--model-path") + 1] == str(folder)  # one argument: the path itself
    assert bench[bench.index("--model") + 1] == str(folder)


def test_printed_names_carry_no_control_characters(tmp_path, capsys):
    """A profile's name reaches every header: an escape sequence in it is refused when the profile is read."""
    bad(gemm(profile(tmp_path, "name: golden_device", 'name: "golden\\e[2J"')), capsys, "name", "control characters")


def test_printer_replaces_control_characters(capsys):
    from simcast.cli.outputs import emit

    emit("a\x1b[31mb\x07c\u202ed\te\nf")
    assert capsys.readouterr().out == "a?[31mb?c?d\te\nf\n"


def test_validate_device_column_names_shipped_profiles_only(tmp_path, capsys):
    secret = write(tmp_path, "secret.txt", "TOPSECRET contents of some file\n")
    long = "d" * 300
    csv = write(
        tmp_path,
        "m.csv",
        f"kind,device,dtype,m,n,k,time_s\ngemm,{secret},bf16,64,64,64,1e-5\ngemm,{long},bf16,64,64,64,1e-5\n",
    )
    rc, out, err = run(["validate", csv], capsys)
    assert rc == 0 and "Traceback" not in err, err
    assert "TOPSECRET" not in out + err and "not a shipped profile" in out


# ------------------------------------------------------------------ tracebacks instead of one line
LONG = "n" * 300  # one path component over the 255-byte limit of the file system


@pytest.mark.parametrize("where", ["--model", "--device", "--trace", "--out"])
def test_path_component_over_255_bytes_is_one_line(tmp_path, capsys, where):
    if where == "--out":
        csv = write(tmp_path, "g.csv", GEMM_CSV)
        args = ["calibrate", csv, "--device", "h100_sxm", "--out", tmp_path / f"{LONG}.yaml"]
    else:
        args = ["simulate", "--model", MODEL, "--device", DEV, "--trace", tmp_path / "t.json"]
        args[args.index(where) + 1] = tmp_path / f"{LONG}.json" if where == "--trace" else LONG
    bad(args, capsys, where)
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "g.csv"])


@pytest.fixture
def unsearchable(tmp_path, monkeypatch):
    """A folder whose contents cannot be looked at (mode 000 for a non-root user; the tests may run as root,
    so stat under it is made to fail as the kernel would)."""
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    real_stat = os.stat

    def stat(path, *a, **k):
        if str(path).startswith(str(locked) + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *a, **k)

    def mkdir(path, *a, **k):
        if str(path).startswith(str(locked) + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_mkdir(path, *a, **k)

    real_mkdir = os.mkdir
    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "mkdir", mkdir)
    return locked


@pytest.mark.parametrize("where", ["--model", "--device", "--trace"])
def test_unreadable_parent_folder_is_one_line(capsys, unsearchable, where):
    args = ["simulate", "--model", MODEL, "--device", DEV]
    target = unsearchable / ("t.json" if where == "--trace" else "x")
    if where == "--trace":
        args += ["--trace", target]
    else:
        args[args.index(where) + 1] = target
    bad(args, capsys, where, "Permission denied")


def test_nul_byte_in_service_yaml_path_is_one_line(tmp_path, capsys):
    svc = service(tmp_path, **{"model: Qwen/Qwen3-0.6B": 'model: Qwen/Qwen3-0.6B\nengine_profile: "e\\0.yaml"'})
    bad(["serve-config", svc], capsys, "engine_profile")
    from simcast.inputs.files import read_text

    with pytest.raises(SimcastInputError, match="NUL"):
        read_text("a\0b.yaml", "engine_profile")


@pytest.fixture
def cold_trace(monkeypatch):
    """The next simulate compiles its trace (memory cache emptied) and writes a cache entry."""
    from simcast.trace import cache

    cache.clear_memory_cache()
    yield
    cache.clear_memory_cache()


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@pytest.mark.parametrize("how", ["under a file", "unsearchable"])
def test_unusable_trace_cache_folder_is_a_warning(tmp_path, capsys, monkeypatch, cold_trace, how, request):
    if how == "under a file":
        (tmp_path / "afile").write_text("x")
        monkeypatch.setenv("SIMCAST_CACHE_DIR", str(tmp_path / "afile" / "cache"))
    else:
        monkeypatch.setenv("SIMCAST_CACHE_DIR", str(request.getfixturevalue("unsearchable") / "cache"))
    rc, out, err = run(["simulate", "--model", MODEL, "--device", DEV, "--input-length", 64], capsys, seconds=120)
    assert rc == 0 and "latency" in out, err
    assert err.count("\n") == 1 and "trace cache folder" in err and "not kept on disk" in err, err


def test_missing_home_falls_back_to_a_temporary_cache(monkeypatch):
    import tempfile

    from simcast.trace import cache

    for var in ("SIMCAST_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    for home in ("", "/", "relative/home"):
        monkeypatch.setenv("HOME", home)
        cache._WARNED.clear()
        with pytest.warns(RuntimeWarning, match="HOME"):
            d = cache.cache_dir()
        assert str(d).startswith(tempfile.gettempdir()) and not str(d).startswith("/.cache"), d
    monkeypatch.delenv("HOME")
    with pytest.warns(RuntimeWarning, match="HOME is not set"):
        cache._WARNED.clear()
        assert str(cache.cache_dir()).startswith(tempfile.gettempdir())


def test_stdout_to_a_full_device(tmp_path):
    """``> /dev/full``: one line on stderr, exit 2 (not 'Exception ignored' and exit 120)."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "simcast", *map(str, gemm(DEV))],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
        )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "stdout" in p.stderr, p.stderr
    assert p.stderr.startswith("simcast: error: ") and "No space left" in p.stderr


def test_stdout_write_error_in_process(capsys, monkeypatch):
    import errno
    import sys

    class Full:
        name = "<stdout>"

        def write(self, _):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Full())
    rc = main([str(a) for a in gemm(DEV)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "stdout" in err and "No space left" in err, err


def test_ctrl_c_is_exit_130_and_one_line(capsys, monkeypatch):
    import simcast.cli.main as cli_main

    def interrupted(_):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli_main.COMMANDS, "kernel", (cli_main.COMMANDS["kernel"][0], interrupted, ""))
    try:
        rc, out, err = run(gemm(DEV), capsys)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped main() as a traceback")
    assert (rc, err) == (130, "simcast: interrupted\n")


def _die(x: int) -> int:
    """A pool task that kills its worker (as the OOM killer or ``kill -9`` would)."""
    import os

    if x == 1:
        os._exit(1)
    return x


def test_killed_pool_worker_is_one_error(capsys):
    from simcast.serving.search.parallel import Backend, pmap

    with time_limit(120), pytest.raises(SimcastInputError, match="a worker process died") as e:
        pmap(_die, [0, 1, 2, 3], backend=Backend(kind="process", workers=2))
    assert e.value.field == "--workers" and "\n" not in str(e.value)


def _entry_with(path: Path, edit) -> None:
    """Rewrite a trace-cache entry through ``edit(entry)`` and give it a correct checksum (a hand edit)."""
    from simcast.trace import cache

    entry = json.loads(path.read_text())
    edit(entry)
    entry["sha256"] = cache._digest({"key": entry["key"], "ops": entry["ops"]})
    path.write_text(json.dumps(entry))


def _first_tensor(entry, op=None):
    for o in entry["ops"]:
        if op is None or o["op"] == op:
            return o
    raise AssertionError(op)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda e: _first_tensor(e, "linear")["args"][1]["t"]["shape"].__setitem__(0, "0"), id="zero"),
        pytest.param(lambda e: _first_tensor(e, "linear")["args"][1]["t"]["shape"].__setitem__(0, "-4096"), id="neg"),
        pytest.param(lambda e: _first_tensor(e, "linear")["args"][0]["t"]["shape"].__setitem__(0, "T-T"), id="T-T"),
        pytest.param(lambda e: _first_tensor(e, "linear")["args"][1]["t"].__setitem__("shape", []), id="0-d"),
        pytest.param(lambda e: _first_tensor(e, "simcast::all_reduce")["args"][1].__setitem__("v", 0), id="group0"),
    ],
)
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_trace_cache_entry_that_makes_no_sense_is_rebuilt(tmp_path, monkeypatch, cold_trace, edit):
    from simcast.core.specs import Batch, ParallelSpec, SimSpec
    from simcast.inputs.loaders import load_device, load_model
    from simcast.sim.simulate import simulate
    from simcast.trace import cache

    monkeypatch.setenv("SIMCAST_CACHE_DIR", str(tmp_path))
    spec = SimSpec(
        model=load_model(MODEL),
        device=load_device(DEV),
        parallel=ParallelSpec(tp=2),
        batch=Batch.prefill(2, 64),
        num_microbatches=1,
    )
    fresh = simulate(spec)
    (path,) = list(cache.cache_dir().glob("*.json"))
    _entry_with(path, edit)
    cache.clear_memory_cache()
    with time_limit(120):
        again = simulate(spec)  # the edited entry is not trusted: rebuilt, never a ZeroDivisionError
    assert again.latency_s == fresh.latency_s


# ------------------------------------------------------------------ output and validation
def test_optimize_json_is_strict_with_null_reasons(capsys, monkeypatch):
    """--refine-top fills the refined_* columns of one row per refined layout; the other rows wrote NaN."""
    import simcast.cli.optimize as cli_optimize
    from simcast.render.refine_tables import REFINED_COLUMNS
    from simcast.serving.search.layouts import model_label

    def fake_refine(a, rows):
        label = model_label(rows[0].result.config)
        return [], [{"parallel": label, "steady_rate_per_s": 1.0, **dict.fromkeys(REFINED_COLUMNS, 2.0)}]

    monkeypatch.setattr(cli_optimize, "run_refine", fake_refine)
    args = ["optimize", "--device", DEV, "--num-devices", 1, "--input-length", 64, "--output-length", 8]
    rc, out, err = run(args + ["--refine-top", 1, "--ttft-limit", 1e6, "--json", MODEL], capsys, seconds=120)
    assert rc == 0, err

    def no_constants(name):
        raise AssertionError(f"non-JSON token {name}")

    doc = json.loads(out, parse_constant=no_constants)
    assert any(v is None for row in doc["rows"] for v in row.values())
    assert "refine-top" in doc["null_values"]


def test_json_text_is_strict():
    import numpy as np

    from simcast.render.text import json_text

    text = json_text({"a": float("nan"), "b": [np.float64("inf"), np.int64(3), -0.0]}, null_reason="why")
    assert json.loads(text) == {"a": None, "b": [None, 3, -0.0], "null_values": "2 value(s) are null: why"}
    assert json_text([1.0, float("nan")]) == "[1.0, null]"


def test_extreme_measured_tpot_is_refused_not_a_warning(tmp_path, capsys):
    csv = write(tmp_path, "r.csv", "concurrency,input_len,output_len,tpot_ms,output_throughput\n4,512,64,1e-300,1e9\n")
    bad(["calibrate-serving", csv, "--model", MODEL, "--device", DEV, "--out", tmp_path / "e.yaml"], capsys, "tpot_ms")
    assert not (tmp_path / "e.yaml").exists()


def test_table_cells_have_bounded_width(tmp_path, capsys):
    """A 2^31-cube GEMM measured at 1 ns is off by 10^24 %: the cell prints 25 digits without a bound."""
    m = 2**31 - 1
    csv = write(tmp_path, "m.csv", f"kind,dtype,m,n,k,time_s\ngemm,bf16,{m},{m},{m},1e-9\n")
    rc, out, err = run(["validate", csv, "--device", DEV], capsys)
    assert rc == 0, err
    cells = [c.strip() for ln in out.splitlines() if ln.startswith("|") for c in ln.split("|")]
    assert max(map(len, cells)) <= 20, out


def test_one_line_warnings(capsys, monkeypatch):
    import warnings

    import simcast.cli.main as cli_main

    def warns(_):
        warnings.warn("overflow encountered in multiply", RuntimeWarning, stacklevel=1)
        return 0

    monkeypatch.setitem(cli_main.COMMANDS, "kernel", (cli_main.COMMANDS["kernel"][0], warns, ""))
    rc, _, err = run(gemm(DEV), capsys)
    assert rc == 0 and err == "simcast: warning: overflow encountered in multiply\n", err


@pytest.mark.parametrize("value", ["١٤,١٤", "1_4,14", "１４,１４", "14,+14"])
def test_partition_takes_ascii_digits_only(tmp_path, capsys, value):
    bad(["simulate", "--model", MODEL, "--device", DEV, "--pp", 2, "--partition", value], capsys, "--partition")
    # a search refuses it at once (exit 2), not as a rejection of every layout (exit 3)
    search = ["optimize", "--model", MODEL, "--device", DEV, "--num-devices", 2, "--input-length", 64]
    bad([*search, "--output-length", 8, "--partition", value], capsys, "--partition")
    svc = service(tmp_path, **{"pp_size: 1": f"pp_size: 2\n  partition: '{value}'"})
    bad(["serve-config", svc], capsys, "partition")


def test_duplicate_yaml_keys_are_refused(tmp_path, capsys):
    svc = service(tmp_path, **{"batch_size: 4": "batch_size: 4\n  batch_size: 64"})
    bad(["serve-config", svc], capsys, "duplicate key 'batch_size'", "line 7")
    bad(
        gemm(profile(tmp_path, "name: golden_device", "name: golden_device\nname: other")),
        capsys,
        "duplicate key 'name'",
    )


def test_no_machine_paths_in_the_repository():
    """Every path in the repository is relative to it (../shared/... resolved from the repo root)."""
    import subprocess

    root = HERE.parent
    try:
        files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    needles = ["/" + "work/", "/" + "home/", "/" + "root/"]
    bad_files = []
    for name in files.splitlines():
        p = root / name
        try:
            text = p.read_text(errors="ignore")
        except (OSError, IsADirectoryError):
            continue
        if any(n in text for n in needles):
            bad_files.append(name)
    assert bad_files == []


# --- disaggregated serving (optimize --serving-mode, service YAML pools) ------------------------------
OPT = ["optimize", "--device", DEV, "--num-devices", 2, "--input-length", 64, "--output-length", 8]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--serving-mode", "split"], "--serving-mode"),
        (["--kv-transfer", "chunked"], "--kv-transfer"),
        (["--request-rate", "-1"], "--request-rate"),
        (["--request-rate", "nan"], "--request-rate"),
        (["--emit", "dynamo"], "dynamo launches disaggregated pools"),
        (["--min-tokens-per-user", "0", "--serving-mode", "disagg"], "--min-tokens-per-user"),
        (["--min-tokens-per-user", "nan", "--serving-mode", "disagg"], "--min-tokens-per-user"),
        (["--min-tokens-per-user", "1e7", "--serving-mode", "disagg"], "--min-tokens-per-user"),
        (["--min-tokens-per-user", "50"], "use it with --serving-mode disagg or both"),
        (["--replay-top", "-1", "--serving-mode", "disagg"], "--replay-top"),
        (["--replay-top", "2.5", "--serving-mode", "disagg"], "--replay-top"),
    ],
)
def test_disagg_flags_one_line(extra, needle, capsys):
    bad(OPT + extra + [MODEL], capsys, needle)


@pytest.mark.parametrize(
    ("tail", "needle"),
    [
        ("serving_mode: split\n", "serving_mode"),
        ("serving_mode: disagg\nprefill: {tp_size: 1}\n", "decode: got None; is required with serving_mode: disagg"),
        ("serving_mode: disagg\nprefill: {replicas: 0}\ndecode: {}\n", "prefill.replicas"),
        ("prefill: {tp_size: 1}\ndecode: {}\n", "only with serving_mode: disagg"),
        ("serving_mode: disagg\nkv_transfer: lazy\nprefill: {}\ndecode: {}\n", "kv_transfer"),
        ("serving_mode: disagg\nprefill: {batch_size: 4}\ndecode: {}\n", "prefill.batch_size"),
        ("serving_mode: disagg\nprefill: {tp_size: 3}\ndecode: {}\n", "tp"),
        ("serving_mode: disagg\nprefill: {}\ndecode: {colour: red}\n", "decode.colour"),
    ],
)
def test_disagg_service_yaml_one_line(tail, needle, tmp_path, capsys):
    bad(["serve-config", write(tmp_path, "s.yaml", SERVICE.format(dev=DEV) + tail)], capsys, needle)


@pytest.mark.parametrize("router", ["bogus", ""])
def test_disagg_router_one_line(router, capsys):
    args = ["bench-serve", "--model", MODEL, "--device", DEV, "--serving-mode", "disagg", "--num-prompts", 4]
    bad(args + ["--disagg-router", router], capsys, "--disagg-router")


def test_disagg_output_length_one(tmp_path, capsys):
    doc = SERVICE.format(dev=DEV).replace("output_length: 128", "output_length: 1")
    bad(
        ["serve-config", write(tmp_path, "s.yaml", doc + "serving_mode: disagg\nprefill: {}\ndecode: {}\n")],
        capsys,
        "--output-length",
    )


# --- the chunk setting as a searched dimension (optimize --chunked-prefill-sizes, bench-serve dynamic chunking)
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--chunked-prefill-sizes", *range(1, 18)], "at most 16 values"),
        (["--chunked-prefill-sizes", 0], "--chunked-prefill-sizes"),
        (["--chunked-prefill-sizes", 10**10], "--chunked-prefill-sizes"),
        (["--chunked-prefill-sizes", "x"], "--chunked-prefill-sizes"),
        (["--input-length", 10**6, "--chunked-prefill-sizes", 16], "at most 4096"),
        (["--chunked-prefill-sizes", 32, "--serving-mode", "disagg"], "aggregated layouts only"),
    ],
)
def test_chunk_search_flags_one_line(extra, needle, capsys):
    bad(OPT + extra + [MODEL], capsys, needle)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--enable-dynamic-chunking"], "--enable-dynamic-chunking: got 'vllm'; is SGLang's flag"),
        (["--engine", "sglang", "--dynamic-chunking-smooth-factor", 2], "--dynamic-chunking-smooth-factor"),
    ],
)
def test_bench_serve_dynamic_chunking_one_line(extra, needle, capsys):
    bad(BENCH + extra, capsys, needle)


@pytest.mark.parametrize("rate", ["1", "-0.1", "nan"])
def test_optimize_prefix_hit_rate_bounded(capsys, rate):
    args = ["optimize", "--device", DEV, "--num-devices", 1, "--input-length", 128, "--output-length", 16]
    bad(args + ["--prefix-hit-rate", rate, MODEL], capsys, "--prefix-hit-rate", seconds=10)


# --- speculative decoding (vLLM --speculative-config, SGLang --speculative-*, service YAML speculative:) -------
EAGLE3 = ["--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 3}']


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--speculative-config", "{not json"], "--speculative-config"),
        (["--speculative-config", "[1, 2]"], "a JSON object"),
        (["--speculative-config", '{"method": "eagle", "num_speculative_tokens": 3, "tree": 1}'], "keys not modelled"),
        (["--speculative-config", '{"method": "medusa", "num_speculative_tokens": 3}'], "--speculative-config method"),
        (["--speculative-config", '{"method": "eagle"}'], "num_speculative_tokens"),
        (["--speculative-config", '{"method": "eagle", "num_speculative_tokens": 65}'], "num_speculative_tokens"),
        (EAGLE3 + ["--spec-acceptance", "1.5"], "--spec-acceptance"),
        (EAGLE3 + ["--spec-acceptance", "0.8,0.6"], "one per speculative token (3)"),
        (["--spec-acceptance", "0.7"], "needs a speculative method flag"),
        (["--speculative-config", '{"method": "deepseek_mtp", "num_speculative_tokens": 1}'], "no MTP layers"),
        (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'], "no published default"),
        (EAGLE3 + ["--speculative-algorithm", "EAGLE3"], "not both"),
        (
            ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "4"],
            "speculative-eagle-topk > 1",
        ),
        (["--speculative-algorithm", "STANDALONE", "--speculative-num-steps", "3"], "--speculative-algorithm"),
        (["--speculative-algorithm", "EAGLE"], "--speculative-num-steps"),
        (["--speculative-num-steps", "3"], "--speculative-algorithm"),
        (["--speculative-algorithm", "NGRAM", "--spec-acceptance", "0.3"], "--speculative-num-draft-tokens"),
    ],
)
def test_speculative_flags(extra, needle, capsys):
    bad(BENCH + extra, capsys, needle)


def test_speculative_service_yaml_and_disagg(tmp_path, capsys):
    svc = service(
        tmp_path, **{"pp_size: 1": "pp_size: 1\nspeculative:\n  method: lookahead\n  num_speculative_tokens: 3"}
    )
    bad(["serve-config", svc], capsys, "speculative.method")
    svc = service(tmp_path, **{"pp_size: 1": "pp_size: 1\nspeculative:\n  method: eagle\n  acceptance: [2]"})
    bad(["serve-config", svc], capsys, "speculative.acceptance")
    args = ["optimize", MODEL, "--device", DEV, "--num-devices", "2", "--input-length", "64", "--output-length", "8"]
    bad(args + EAGLE3 + ["--serving-mode", "disagg", "--request-rate", "1"], capsys, "not for the fewest devices")


# --- issue 25, item 7: a fresh adversarial pass ----------------------------------------------------------------
OPT_SMALL = ["optimize", MODEL, "--device", DEV, "--num-devices", "4", "--input-length", "128", "--output-length", "8"]


def test_replicas_for_a_rate_is_at_least_one():
    from simcast.serving.disagg.search import replicas_for

    assert replicas_for(1e-10, 5.0) == 1  # a tiny rate: the smallest deployment, never none
    assert replicas_for(10.0, 5.0) == 2 and replicas_for(10.1, 5.0) == 3  # ceil(R / per replica)


@pytest.mark.parametrize("mode", ["agg", "both"])
def test_optimize_a_tiny_request_rate_needs_one_replica(capsys, mode):
    rc, out, err = run([*OPT_SMALL, "--tp-sizes", "1", "--request-rate", "1e-10", "--serving-mode", mode], capsys)
    assert rc == 0, err
    assert "fewest: 0 devices" not in out and "replicas: got 0" not in err
    assert "agg:    1 devices" in out
    if mode == "both":
        assert "disagg: 2 devices, 1P1D" in out  # one prefill + one decode replica of one device


def test_calibrate_refuses_an_out_that_is_one_of_its_inputs(tmp_path, capsys):
    csv = write(tmp_path, "newdev.csv", "kind,device,dtype,m,n,k,time_s\ngemm,newdev,bf16,16,64,64,1e-5\n")
    before = Path(csv).read_text()
    bad(["calibrate", csv, "--device-template", "h100_sxm", "--out", csv], capsys, "--out", "measured input")
    assert Path(csv).read_text() == before  # the measurements are kept
    tpl = write(tmp_path, "h100_sxm.yaml", (HERE.parent / "simcast/data/device_profiles/h100_sxm.yaml").read_text())
    bad(["calibrate", "--device", "b200", "--transfer-from", tpl, "--out", tpl], capsys, "--transfer-from input")


def test_calibrate_refuses_writing_into_the_package_data(tmp_path, capsys):
    from simcast.inputs.files import package_data_dir

    target = package_data_dir("device_profiles") / "h100_sxm.yaml"
    before = target.read_bytes()
    csv = write(tmp_path, "g.csv", GEMM_CSV)
    bad(["calibrate", csv, "--device", "h100_sxm", "--out", target], capsys, "--out", "simcast's installed data")
    assert target.read_bytes() == before


def test_a_profile_is_named_after_its_file(tmp_path, capsys):
    from simcast.inputs.loaders import load_device, profiles_dir, shipped_devices

    for name in shipped_devices():  # every shipped profile (and the test one) already complies
        assert load_device(str(profiles_dir() / f"{name}.yaml")).name == name
    assert load_device(DEV).name == Path(DEV).stem
    other = write(tmp_path, "my_gpu.yaml", GOOD_DEVICE)
    bad(gemm(other), capsys, "name: got 'golden_device'", "my_gpu")
    # calibrate writes a profile only to <its name>.yaml, so what it writes loads again
    out = tmp_path / "o.yaml"
    bad(
        ["calibrate", write(tmp_path, "g.csv", GEMM_CSV), "--device", "h100_sxm", "--out", out], capsys, "h100_sxm.yaml"
    )
    assert not out.exists()


def test_serve_config_request_rate_needs_num_prompts(capsys, tmp_path):
    """A disaggregated service replays at --request-rate only with --num-prompts (an aggregated one takes the
    rate alone: the open-loop estimate, tests/serving/test_rate.py)."""
    svc = write(tmp_path, "svc.yaml", SERVICE.format(dev=DEV) + "serving_mode: disagg\nprefill: {}\ndecode: {}\n")
    bad(["serve-config", svc, "--request-rate", "5000"], capsys, "--request-rate", "--num-prompts")


def test_prefix_hit_rate_with_prefix_caching_off_conflicts(capsys):
    args = [*OPT_SMALL, "--tp-sizes", "1", "--prefix-hit-rate", "0.5"]
    bad([*args, "--no-enable-prefix-caching"], capsys, "--prefix-hit-rate", "--no-enable-prefix-caching")
    bad([*args, "--engine", "sglang", "--disable-radix-cache"], capsys, "--prefix-hit-rate", "prefix caching off")


def test_speculative_config_duplicate_key(capsys):
    spec = '{"method": "eagle", "num_speculative_tokens": 3, "method": "ngram"}'
    bad(BENCH + ["--speculative-config", spec], capsys, "--speculative-config", "duplicate key 'method'")


def test_prefix_hit_rate_range_is_worded_once(capsys):
    import simcast
    from simcast.inputs.limits import PREFIX_HIT_RATE_RANGE

    for v in ("1", "-0.5", "nan", "x"):
        assert PREFIX_HIT_RATE_RANGE in bad([*OPT_SMALL, "--prefix-hit-rate", v], capsys, "--prefix-hit-rate")
    for v in (1.0, -0.5, float("nan")):
        with pytest.raises(SimcastInputError, match=r"\[0, 1\)") as e:
            simcast.optimize(model=MODEL, device=DEV, num_devices=1, input_length=8, output_length=2, prefix_hit_rate=v)
        assert e.value.allowed == PREFIX_HIT_RATE_RANGE


def test_work_limit_hint_names_only_the_commands_flags(tmp_path, capsys):
    pools = "prefill: {replicas: 1, tp_size: 1}\ndecode: {replicas: 1, tp_size: 1}\n"
    text = SERVICE.format(dev=DEV) + "serving_mode: disagg\nrequest_rate: 5\n" + pools
    # 1e5 requests x 128 output tokens: 1.3e7 decode steps, over the engine-step bound (4e6), under the other
    err = bad(["serve-config", service(tmp_path, text), "--num-prompts", "100000"], capsys, "engine steps", seconds=60)
    assert "--max-concurrency" not in err and "simulate fewer requests (--num-prompts)" in err


def test_control_character_in_a_csv_gpu_name_blames_the_column(tmp_path, capsys):
    csv = write(
        tmp_path, "newdev.csv", 'kind,device,dtype,m,n,k,time_s,gpu_name\ngemm,newdev,bf16,16,64,64,1e-5,"A\x1b[2J"\n'
    )
    out = tmp_path / "newdev.yaml"
    err = bad(["calibrate", csv, "--device-template", "h100_sxm", "--out", out], capsys, "column gpu_name")
    assert "--device-template" not in err and not out.exists()


@pytest.mark.parametrize(
    "old, new, needle",
    [
        ("hbm_bw_bytes_per_s: 3.0e+12", "hbm_bw_bytes_per_s: 1.0e-300", "memory.hbm_bw_bytes_per_s"),
        ("hbm_bytes: 85899345920", "hbm_bytes: 1", "memory.hbm_bytes"),
        ("matmul: 0.8 ", "matmul: 1.0e-300 ", "efficiency.matmul"),
        ("{bf16: 1.0e+15,", "{bf16: 1.0e-300,", "compute.matmul_flops_per_s.bf16"),
    ],
)
def test_physical_profile_values_have_floors(tmp_path, capsys, old, new, needle):
    bad(gemm(profile(tmp_path, old, new)), capsys, needle, "in [")


def test_inter_node_bandwidth_floor_everywhere(tmp_path, capsys):
    """1e-300 GB/s passed every "> 0" check and ranked a 1e-297 token/s row first with meets_limits true."""
    import simcast
    from simcast.core.fabrics import FabricChoice

    for flag in ("1e-300", "1e-4"):
        bad([*OPT_SMALL, "--inter-node-bandwidth", flag], capsys, "--inter-node-bandwidth", "[0.001, 1e+06] GB/s")
    bad(gemm(DEV) + ["--inter-node-bandwidth", "1e-300"], capsys, "--inter-node-bandwidth")
    svc = service(tmp_path, **{"pp_size: 1": "pp_size: 1\n  inter_node_bandwidth_gbps: 1.0e-300"})
    bad(["serve-config", svc], capsys, "inter_node_bandwidth_gbps")
    with pytest.raises(SimcastInputError, match="0.001"):
        simcast.optimize(
            model=MODEL, device=DEV, num_devices=1, input_length=8, output_length=2,
            fabric=FabricChoice(bandwidth_gbps=1e-300, bandwidth_field="fabric.bandwidth_gbps"),
        )  # fmt: skip


def test_a_home_that_does_not_exist_is_not_created(tmp_path, monkeypatch, capsys):
    """HOME=/nonexistent: the run goes on without the disk cache (one warning) and makes no folder."""
    from simcast.trace import cache

    for var in ("SIMCAST_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "no" / "such" / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SIMCAST_SHIPPED_TRACES", "0")  # compile, so a disk cache would be written
    cache.shipped_usable.cache_clear()
    cache.clear_memory_cache()
    cache._WARNED.clear()
    try:
        rc, out, err = run(
            ["simulate", "--model", MODEL, "--device", DEV, "--batch", "1", "--input-length", "8"], capsys
        )
    finally:
        cache.shipped_usable.cache_clear()
    assert rc == 0 and "latency" in out, err
    assert "does not exist" in err and "not kept on disk" in err and err.count("\n") == 1, err
    assert not (tmp_path / "no").exists()


def test_calibrate_serving_refuses_an_out_that_is_its_engine_profile(tmp_path, capsys):
    csv = write(tmp_path, "r.csv", "concurrency,input_len,output_len,tpot_ms,output_throughput\n4,512,64,20,200\n")
    prof = write(tmp_path, "engine.yaml", "# a calibrated engine profile\n")
    args = ["calibrate-serving", csv, "--model", MODEL, "--device", DEV, "--engine-profile", prof, "--out", prof]
    bad(args, capsys, "--out", "--engine-profile input")
    assert Path(prof).read_text() == "# a calibrated engine profile\n"

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

HERE = Path(__file__).parent
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


def run(args, capsys, seconds: int = 30):
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
    return write(tmp_path, "dev.yaml", GOOD_DEVICE.replace(old, new))


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


def test_calibrate_gemm_only_csv_without_nodes_column_works(tmp_path, capsys):
    csv = write(tmp_path, "g.csv", GEMM_CSV)
    out = tmp_path / "o.yaml"
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
@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_bad_measured_csv_is_one_line(tmp_path, capsys, command, text, needles):
    csv = write(tmp_path, "m.csv", text)
    out = tmp_path / "o.yaml"
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
    import simcast.serving.search as search

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
    assert rc == 0, err
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
        ("t.csv", GARBAGE, ["UTF-8"]),
    ],
)
def test_bench_serve_bad_dataset(tmp_path, capsys, name, text, needles):
    bad(BENCH + ["--dataset", write(tmp_path, name, text)], capsys, *needles, seconds=10)


def test_bench_serve_save_result_checked_before_the_work(tmp_path, capsys, monkeypatch):
    import simcast.serving.requests as requests

    def no_run(*a, **k):
        raise AssertionError("the simulation ran before the output path was checked")

    monkeypatch.setattr(requests, "simulate_requests", no_run)
    bad(BENCH + ["--save-result", tmp_path / "missing" / "r.json"], capsys, "--save-result")
    (tmp_path / "r.requests.csv").mkdir()  # the per-request CSV's path is a folder
    bad(BENCH + ["--save-result", tmp_path / "r.json"], capsys, "--save-result")
    assert not (tmp_path / "r.json").exists()


def test_readme_lists_every_limit():
    from simcast.inputs.limits import TABLE

    readme = (HERE.parent / "README.md").read_text()
    for what, bound, shown in TABLE:
        assert eval(shown.replace("^", "**")) == bound, shown  # the README writes the bound the code enforces
        assert f"| {what} | {shown} |" in readme, what


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

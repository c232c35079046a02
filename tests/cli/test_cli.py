"""CLI surface: golden output, JSON fields, bad input -> one line + exit 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simcast.cli.main import main

HERE = Path(__file__).parents[1]
DEV = str(HERE / "data" / "golden_device.yaml")
GOLDEN_ARGS = [
    "simulate",
    "--model",
    "Qwen/Qwen3-0.6B",
    "--device",
    DEV,
    "--tp",
    "2",
    "--pp",
    "2",
    "--batch",
    "4",
    "--input-length",
    "512",
]


def run_cli(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_golden_simulate_output(capsys):
    rc, out, err = run_cli(GOLDEN_ARGS, capsys)
    assert rc == 0 and err == ""
    golden = HERE / "golden" / "simulate_qwen3_0.6b_tp2_pp2.txt"
    if os.environ.get("SIMCAST_UPDATE_GOLDEN"):
        golden.write_text(out)
    assert out == golden.read_text()


def test_json_report_fields(capsys):
    rc, out, _ = run_cli(GOLDEN_ARGS + ["--json"], capsys)
    d = json.loads(out)
    for k in [
        "latency_s",
        "stage_compute_times_s",
        "stage_comm_times_s",
        "stage_times_s",
        "send_recv_events",
        "breakdown",
        "stages",
        "max_stage_weight_bytes",
        "max_stage_kv_cache_bytes",
    ]:
        assert k in d
    assert set(d["breakdown"]) == {"compute", "communication", "bubble"}
    for s in d["stages"]:
        assert {"stage_id", "start_layer", "end_layer", "weight_bytes", "kv_cache_bytes", "activation_bytes"} <= set(s)
    ev = d["send_recv_events"][0]
    assert ev["src_stage"] == 0 and ev["dst_stage"] == 1 and ev["message_bytes"] == 2 * 512 * 1024 * 2 * 2


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--tp", "3"], "tp_size: got 3; must divide num_attention_heads=16"),
        (["--tp", "4", "--pp", "4", "--num-devices", "8"], "--tp*--pp: got 16; must be <= --num-devices=8"),
        (["--pp", "29"], "--pp: got 29; must be <= the model's 28 layers"),
        (["--input-length", "0"], "--input-length: got 0; must be a positive integer"),
        (["--batch", "-2"], "--batch: got -2; must be a positive integer"),
        (["--partition", "10,10", "--pp", "2"], "--partition: got '10,10'; layer counts must sum to the model's 28"),
        (["--phase", "sideways"], "--phase: invalid choice: 'sideways'"),
    ],
)
def test_bad_flags_one_line_exit_2(args, needle, capsys):
    base = ["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", DEV]
    with pytest.raises(SystemExit) if args[0] in ("--input-length", "--batch", "--phase") else _nullctx() as exc:
        rc, out, err = run_cli(base + args, capsys)
    if exc is not None and hasattr(exc, "value"):
        assert exc.value.code == 2
        err = capsys.readouterr().err
    else:
        assert rc == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


class _nullctx:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def test_unknown_model_and_device_and_malformed_yaml(tmp_path, capsys):
    rc, _, err = run_cli(["simulate", "--model", "nope/Nope-1B", "--device", DEV], capsys)
    assert rc == 2 and err.startswith("simcast: error: --model: got 'nope/Nope-1B'")
    assert "meta-llama/Llama-3.1-70B" in err
    rc, _, err = run_cli(["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", "h900"], capsys)
    assert rc == 2 and "--device: got 'h900'" in err and "h100_sxm" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncompute: [\n")
    rc, _, err = run_cli(["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", str(bad)], capsys)
    assert rc == 2 and "malformed" in err and err.count("\n") == 1


def test_module_entry_point_and_no_traceback():
    p = subprocess.run(
        [sys.executable, "-m", "simcast", "simulate", "--model", "Qwen/Qwen3-0.6B", "--device", DEV, "--tp", "5"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.count("\n") == 1

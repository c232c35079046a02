"""benchmarks/deepseek_r1_matrix.py: every row's command parses with bench-serve's own parser, the rows count
their GPUs as the layouts say, and the physical bounds (deepseek_r1_bounds.py) equal hand computations."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


MATRIX = _load("deepseek_r1_rows")
_load("deepseek_r1_matrix")  # the runner imports


def _parses(kind: str) -> None:
    from simcast.cli.main import make_parser

    p = make_parser("bench-serve")
    rows = MATRIX.matrix(kind)
    assert len({r.id for r in rows}) == len(rows)
    for r in rows:
        a = p.parse_args(r.argv())
        assert a.max_concurrency == r.conc and a.num_prompts == 10 * r.conc


@pytest.mark.slow
def test_default_rows_parse():
    _parses("default")


@pytest.mark.slow
def test_every_row_parses():
    _parses("full")


def test_gpu_counts():
    by_id = {r.id: r for r in MATRIX.matrix("full")}
    # agg: attention DP8 x TP1 = 8 GPUs; disagg: 1 x DEP4 + 1 x DEP32 = 36; 4 x DEP4 + DEP8 = 24
    assert by_id["b200-sglang-fp8-dep8-1k1k-c64"].gpus() == 8
    assert by_id["gb200-dynamo-trtllm-fp4-1p-dep4-1d-dep32-1k1k-c64"].gpus() == 36
    assert by_id["gb200-dynamo-trtllm-fp4-4p-dep4-1d-dep8-1k1k-c64"].gpus() == 24
    assert by_id["h100-sglang-fp8-tp16-1k1k-c64"].gpus() == 16


def test_bounds_by_hand():
    from simcast.inputs.loaders import load_device

    b = _load("deepseek_r1_bounds")
    row = next(r for r in MATRIX.matrix("full") if r.id == "b200-sglang-fp8-tp8-1k1k-c64")
    res = {"completed": 10, "total_input_tokens": 10240, "total_output_tokens": 10240}
    got = b.bounds_for(row, res)
    dev = load_device("b200")
    # DeepSeek-V3 MLA latent: (512 + 64) x 61 layers x 1 byte (fp8) = 35,136 bytes per context token;
    # mean context 1024 + 1024 / 2 = 1536; TP8 reads the latent on every rank
    assert got.hbm_tok_s_gpu == pytest.approx(dev.hbm_bw_bytes_per_s / (35_136 * 1536 * 8))
    # compute: 2 x 37.5e9-ish active parameters x (in + out) / out = 2 per output token
    from simcast.core.params import active_params
    from simcast.inputs.loaders import load_model

    n_active = active_params(load_model("deepseek-ai/DeepSeek-V3"))
    assert 36e9 < n_active < 39e9  # the published 37B activated
    assert got.compute_tok_s_gpu == pytest.approx(max(dev.matmul_flops_per_s.values()) / (2 * n_active * 2))
    # TPOT floor at TP8 without MTP: (always-read bytes / 8 + top-8 experts / 8) / HBM
    assert got.tpot_floor_ms == pytest.approx(
        (b._always_read_bytes(load_model(row.model)) + b._top_k_expert_bytes(load_model(row.model)))
        / 8
        / dev.hbm_bw_bytes_per_s
        * 1e3
    )
    assert b.Bounds(tpot_floor_ms=1.0, hbm_tok_s_gpu=10, compute_tok_s_gpu=20).violations(tpot_ms=0.5, tok_s_gpu=15)

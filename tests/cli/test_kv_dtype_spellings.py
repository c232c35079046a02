"""``--kv-cache-dtype`` takes the engines' spellings: fp8_e4m3 / fp8_e5m2 (vLLM, SGLang) are simcast's fp8."""

from __future__ import annotations

from simcast.cli.main import make_parser


def test_engine_spellings_parse_as_fp8():
    p = make_parser("simulate")
    base = ["simulate", "--model", "deepseek-ai/DeepSeek-V3", "--device", "h200_sxm"]
    for given, want in (("fp8_e4m3", "fp8"), ("FP8_E5M2", "fp8"), ("bfloat16", "bf16"), ("fp8", "fp8")):
        assert p.parse_args([*base, "--kv-cache-dtype", given]).kv_cache_dtype == want

"""One dtype / weight-format table (simcast.core.dtypes): its values, and no second byte-size mapping anywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simcast.core.dtypes import (
    DTYPE_BYTES,
    PEAK_DTYPE,
    WEIGHT_FORMAT_BYTES,
    element_bytes,
    gemm_compute_dtype,
    number_format,
)

PKG = Path(__file__).resolve().parents[2] / "simcast"
_NAMES = r"(fp8|bf16|fp16|fp32|float16|bfloat16|half|float32|mxfp4|fp8_block|int8|int32|int64)"
_MAPPING_ENTRY = re.compile(r"[\"']" + _NAMES + r"[\"']\s*:\s*[0-9]")


def test_values_by_hand() -> None:
    assert DTYPE_BYTES == {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
    assert WEIGHT_FORMAT_BYTES["fp8_block"] == pytest.approx(1 + 4 / 16384)  # one fp32 scale per 128x128 block
    assert WEIGHT_FORMAT_BYTES["mxfp4"] == pytest.approx(0.53125)  # 4 bits + one 8-bit scale per 32 values
    assert element_bytes("fp8_block") == 1 and element_bytes("bfloat16") == 2 and element_bytes("half") == 2
    assert PEAK_DTYPE["fp8_block"] == "fp8" and PEAK_DTYPE["mxfp4"] == "bf16"
    assert gemm_compute_dtype("fp8_block", "bf16") == "fp8" and gemm_compute_dtype("mxfp4", "bf16") == "bf16"
    assert number_format("float8_e4m3fn").name == "fp8"


def test_no_other_module_defines_a_byte_size_mapping() -> None:
    offenders = [
        f"{f.relative_to(PKG)}:{i}"
        for f in PKG.rglob("*.py")
        if f.name != "dtypes.py"
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if _MAPPING_ENTRY.search(line)
    ]
    assert offenders == [], "byte sizes belong in simcast/core/dtypes.py: " + ", ".join(offenders)


def test_the_grep_finds_a_mapping() -> None:
    assert _MAPPING_ENTRY.search('X = {"bf16": 2, "fp8": 1}')  # the test above can fail

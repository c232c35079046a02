"""Rules that depend on the device read profile fields, never the profile's name."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from simcast.engines.vllm import vllm_limits
from simcast.inputs.loaders import load_device

PKG = Path(__file__).resolve().parents[2] / "simcast"
_NAME_TEST = re.compile(
    r"\b(device|dev)\.name\.(lower|upper|startswith|endswith)\(|[\"'][a-z0-9_]+[\"']\s+(not\s+)?in\s+(device|dev)\.name\b"
)


def test_vllm_reads_the_reported_name() -> None:
    a100 = load_device("a100_sxm_80gb")
    assert vllm_limits(a100, "server") == (2048, 256)  # vLLM's table: an A100, even 80 GB, gets the small budget
    unnamed = dataclasses.replace(a100, reported_name="")  # same memory, the driver's name unknown
    assert vllm_limits(unnamed, "server") == (8192, 1024)
    h100 = load_device("h100_sxm")
    assert vllm_limits(dataclasses.replace(h100, name="a100_lookalike"), "server") == (8192, 1024)


def test_no_code_tests_a_device_name() -> None:
    offenders = [
        f"{f.relative_to(PKG)}:{i}"
        for f in PKG.rglob("*.py")
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if _NAME_TEST.search(line)
    ]
    assert offenders == [], offenders
    assert _NAME_TEST.search('big = "a100" not in device.name.lower()')  # the grep can fail

"""The public dev set (benchmarks/devset/*.csv): rows parse, configurations are complete, no reserved source,
and the runner runs simcast on two rows."""

from __future__ import annotations

import csv
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEVSET = ROOT / "benchmarks" / "devset"
CSVS = (DEVSET / "serving_public.csv", DEVSET / "pp_public.csv")


def _runner():
    spec = importlib.util.spec_from_file_location("serving_devset", ROOT / "benchmarks" / "serving_devset.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["serving_devset"] = mod
    spec.loader.exec_module(mod)
    return mod


RUNNER = _runner()

# The reserved sources of issues 15, 16, 22 and 26-28, written out here as well as in reserved_sources.txt, so that
# thinning that file cannot silently let a reserved row in.
RESERVED_EXAMPLES = (
    "https://github.com/mlcommons/inference_results_v4.1/tree/main/closed/NVIDIA",
    "https://github.com/mlcommons/inference_results_v5.1/blob/main/closed/AMD/README.md",
    "https://rocm.docs.amd.com/en/latest/how-to/performance-validation/vllm-performance-results.html",
    "https://github.com/sgl-project/sglang/tree/main/benchmark/benchmark_vllm_060",
    "https://github.com/datacrunch-research/h200-benchmarks",
    "https://github.com/vllm-project/vllm/pull/43232",
    "https://blogs.oracle.com/cloud-infrastructure/post/serving-llama-31-405b-amd-mi300x",
    "https://lmsys.org/blog/2026-01-15-pipeline-parallelism/",
    "https://blog.vllm.ai/2024/07/23/llama31.html",
    "https://developer.nvidia.com/blog/boosting-llama-3-1-405b-throughput-by-another-1-5x-on-nvidia-h200",
    "https://github.com/surajssd/llm-k8s/tree/main/results",
    "https://www.substratus.ai/blog/benchmarking-llama-3.1-70b-on-l4",
    # issues 22 and 26-28
    "https://lmsys.org/blog/2025-05-05-large-scale-ep/",
    "https://lmsys.org/blog/2025-06-16-gb200-part-1/",
    "https://github.com/kvcache-ai/Mooncake/blob/main/doc/en/performance/sglang-benchmark-results-v1.md",
    "https://github.com/ai-dynamo/dynamo/tree/main/benchmarks",
    "https://github.com/NVIDIA/TensorRT-LLM/blob/main/docs/source/blogs/tech_blog/blog1.md",
    "https://github.com/sgl-project/sglang/pull/4716",
    "https://github.com/vllm-project/vllm/issues/20780",
    "https://github.com/vllm-project/vllm/pull/9668",
    "https://github.com/SemiAnalysisAI/InferenceX",
    "https://inferencemax.semianalysis.com/",
    "https://github.com/someone/InferenceX-app",
    "aiconfigurator/systems/data/h200_sxm/vllm/0.24.0/gemm_perf.txt",
    "nccl_2.29.2 all_reduce table",
)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("path", CSVS, ids=lambda p: p.name)
def test_csv_parses_with_the_documented_columns(path: Path) -> None:
    with path.open(newline="") as f:
        header = next(csv.reader(f))
    assert tuple(header) == RUNNER.COLUMNS
    readme = (DEVSET / "README.md").read_text()
    for col in RUNNER.COLUMNS:
        assert f"`{col}`" in readme, f"column {col} is not defined in benchmarks/devset/README.md"
    rows = _rows(path)
    assert rows
    for row in rows:
        float(row["value"])
        for col in ("num_gpus", "tp", "pp", "dp", "isl", "osl", "num_prompts"):
            assert int(row[col]) >= 1, (row["id"], col)
        assert int(row["num_gpus"]) == int(row["tp"]) * int(row["pp"]) * int(row["dp"]), row["id"]
        assert row["request_rate"] == "inf" or float(row["request_rate"]) > 0
        if row["kind"] == "concurrency":
            assert int(row["max_concurrency"]) >= 1, row["id"]
        assert row["unit"] == RUNNER.METRICS[row["metric"]][1], row["id"]
        assert row["confidence"] in ("high", "medium", "low")


@pytest.mark.parametrize("path", CSVS, ids=lambda p: p.name)
def test_every_row_has_a_source_and_a_complete_configuration(path: Path) -> None:
    rows = RUNNER.load_rows([path])  # refuses missing fields, unknown kinds/metrics and reserved sources
    for row in rows:
        assert re.match(r"https?://\S+ \(.+\)", row["source"]), f"{row['id']}: source must be 'URL (which part)'"
        assert row["notes"].strip(), row["id"]
        assert (ROOT / "device_profiles" / f"{row['device']}.yaml").is_file(), row["device"]
        assert (ROOT / "models" / row["model"] / "config.json").is_file(), row["model"]
    # one configuration, one set of values: rows sharing an id agree on every configuration column
    by_id: dict[str, tuple[str, ...]] = {}
    for row in rows:
        key = RUNNER.config_key(row)
        assert by_id.setdefault(row["id"], key) == key, f"{row['id']}: rows of one id differ in configuration"


def test_no_row_cites_a_reserved_source() -> None:
    pats = RUNNER.reserved_patterns()
    for url in RESERVED_EXAMPLES:
        assert any(p.search(url) for p in pats), f"reserved_sources.txt does not catch {url}"
    for path in CSVS:
        for row in _rows(path):
            for p in pats:
                assert not p.search(row["source"]) and not p.search(row["notes"]), (row["id"], p.pattern)


def test_load_rows_refuses_a_reserved_source(tmp_path: Path) -> None:
    row = _rows(CSVS[0])[0]
    row["source"] = "https://www.substratus.ai/blog/benchmarking-llama-3.1-70b-on-l4 (results)"
    bad = tmp_path / "bad.csv"
    with bad.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RUNNER.COLUMNS)
        w.writeheader()
        w.writerow(row)
    with pytest.raises(SystemExit, match="reserved source"):
        RUNNER.load_rows([bad])


@pytest.mark.slow
def test_runner_runs_two_rows(tmp_path: Path) -> None:
    rows = [r for r in RUNNER.load_rows(list(CSVS)) if r["id"] in ("gs-q8-h100-vllm-c8", "qw-q8b-h20-tp1-in1")]
    assert {r["id"] for r in rows} == {"gs-q8-h100-vllm-c8", "qw-q8b-h20-tp1-in1"}
    records = RUNNER.evaluate(rows, timeout_s=600, log=lambda _msg: None)
    assert len(records) == len(rows)
    for rec in records:
        assert rec["run"].error == "", rec["run"].error
        assert rec["predicted"] is not None and rec["predicted"] > 0
        assert rec["error"] == pytest.approx((rec["predicted"] - rec["measured"]) / rec["measured"])
    text = RUNNER.markdown(records)
    assert "gs-q8-h100-vllm-c8" in text and "qw-q8b-h20-tp1-in1" in text and "median abs error" in text
    assert text.count("simcast bench-serve") == 2  # one command per configuration

"""Calibration provenance: a value is labelled fitted only when a fit produced it, with the data named."""

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import yaml

from simcast.calib.readers.measured_schema import GENERIC_COLUMNS
from simcast.cli.main import main
from simcast.cost.kernels import one_kernel as kernels
from simcast.inputs.loaders import load_device

PROFILES = Path(__file__).resolve().parents[2] / "device_profiles"
GENERIC = list(GENERIC_COLUMNS)  # the generic measured schema (simcast.calib.readers.measured_schema)
FIT = "fit by simcast calibrate"


def key_lines(text):
    """``{(section path, key): full line}`` of a profile, collectives keyed by (link, kind, gpus)."""
    out, stack = {}, []
    for line in text.splitlines():
        body = line.split("#", 1)[0]
        if not body.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if body.strip().startswith("- {"):
            item = yaml.safe_load(body.strip()[2:])
            if "kind" in item:  # a collective fit (engines: GEMM/attention fits have no kind)
                out[(".".join(p for _, p in stack[:-1]), item["kind"], item["gpus"])] = line
            continue
        key, _, value = body.strip().partition(":")
        out[(".".join(p for _, p in stack), key.strip())] = line
        if not value.strip():
            stack.append((indent, key.strip()))
    return out


def fitted_count(text):
    """Values a profile's lines say were fitted: a collective line holds two (alpha, beta)."""
    n = 0
    for line in text.splitlines():
        if "#" in line and line.split("#", 1)[1].strip().startswith(FIT):
            n += 2 if line.lstrip().startswith("- {") else 1
    return n


def calibration_block(text):
    return yaml.safe_load(text)["calibration"]


def gemm_csv(tmp_path, dev):
    truth = dataclasses.replace(dev, efficiency=dataclasses.replace(dev.efficiency, matmul=0.7, memory=0.9))
    rows = []
    for m in (1, 16, 128, 1024, 4096):
        for n, k in ((1280, 8192), (8192, 1024), (28672, 8192)):
            rows.append(
                {
                    "kind": "gemm",
                    "device": dev.name,
                    "dtype": "bf16",
                    "m": m,
                    "n": n,
                    "k": k,
                    "time_s": kernels.gemm(truth, m, n, k, "bf16").time_s,
                }
            )
    path = tmp_path / "g.csv"
    pd.DataFrame(rows).reindex(columns=GENERIC).to_csv(path, index=False)
    return path


@pytest.mark.slow  # ~1 s or more: out of make test-fast
@pytest.mark.parametrize("device", ["h100_sxm", "a100_sxm_40gb"])
def test_gemm_only_calibration_keeps_unchanged_values_and_their_labels(tmp_path, capsys, device):
    out = tmp_path / f"{device}.yaml"
    assert main(["calibrate", str(gemm_csv(tmp_path, load_device(device))), "--device", device, "--out", str(out)]) == 0
    before, after = (PROFILES / f"{device}.yaml").read_text(), out.read_text()
    old, new = key_lines(before), key_lines(after)
    gemm = {"matmul", "matmul_half_m_ridge", "matmul_half_n", "matmul_half_k", "memory", "launch_overhead_s"}
    for key, line in new.items():
        if key[0] == "efficiency" and key[1] in gemm:
            assert line.split("#", 1)[1].strip().startswith(f"{FIT} on g.csv"), line
        elif key[0] != "calibration" and key[0]:  # links, other efficiencies, peaks: untouched, label and all
            assert line == old[key], (key, line)

    def not_block(k):
        return "calibration" not in (k[0], k[1])

    kept = {k for k in old if not_block(k)}
    assert kept <= set(new) and {k for k in set(new) - kept if not_block(k)} <= {("efficiency", g) for g in gemm}
    block = calibration_block(after)
    assert block["fitted_in_this_run"] == 6
    assert (
        block["fitted_parameters"] == fitted_count(after) == (12 if device == "h100_sxm" else 6)
    )  # h100: NCCL carried over
    assert "wrote" in capsys.readouterr().out


def test_transfer_from_an_unfitted_profile_says_so(tmp_path):
    out = tmp_path / "b200.yaml"  # a profile file is named after its profile
    assert main(["calibrate", "--device", "b200", "--transfer-from", "a100_sxm_40gb", "--out", str(out)]) == 0
    text = out.read_text()
    assert FIT not in text and "vidur" not in text  # nothing was fitted, on b200 or on a100_sxm_40gb
    block = calibration_block(text)
    assert block["fitted_parameters"] == 0 and block["carried_over_fitted_on_source"] == 0
    assert "a100_sxm_40gb has no calibration" in block["method"]
    lines = key_lines(text)
    assert "uncalibrated prior" in lines[("efficiency", "matmul")]
    assert "86.9%" in lines[("efficiency", "matmul")]  # the source's own citation travels with its value
    # a100_sxm_40gb has no GEMM curves: the carried-over b200 profile has none either (h100's are gone)
    assert ("efficiency", "matmul_half_n") not in lines
    dev = load_device(str(out))
    assert dev.efficiency.matmul == 0.85 and dev.efficiency.matmul_half_n == 0.0


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_transfer_from_a_fitted_profile_cites_each_value_s_own_fit(tmp_path):
    out = tmp_path / "h200_sxm.yaml"
    assert main(["calibrate", "--device", "h200_sxm", "--transfer-from", "h100_sxm", "--out", str(out)]) == 0
    text = out.read_text()
    block = calibration_block(text)
    assert block["fitted_parameters"] == fitted_count(text) == 0  # no measurement on this device
    # h100_sxm's 12 fitted numbers, its `vector` prior (0.5, never fitted) and the 14 NCCL values h100_sxm itself
    # carries (7 segments x latency, bus bandwidth: its own reduce-scatter + all-gather below 1 MiB, b200_sxm's
    # transfer above; simcast.calib.fitting.nccl_bridge)
    assert block["carried_over_fitted_on_source"] == 12 and block["carried_over_parameters"] == 27
    assert (
        block["source_calibration"]["source"] == calibration_block((PROFILES / "h100_sxm.yaml").read_text())["source"]
    )
    lines = key_lines(text)
    assert "carried over from h100_sxm, where fit by simcast calibrate on" in lines[("efficiency", "matmul")]
    assert "Llama-2-70b-hf_mlp.csv" in lines[("efficiency", "matmul")]
    assert "send_recv.csv" in lines[("links.intra_node", "latency_s")]
    # h100_sxm's NCCL fit is itself carried over (simcast.calib.fitting.nccl_bridge)
    assert "NCCL's own all-reduce" in lines[("links.intra_node", "all_reduce", 8)]
    assert "; prior 0.80: H100 SXM measured 80.3%" in lines[("efficiency", "matmul")]  # h200's own prior kept


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_profiles_count_only_fitted_values(path):
    text = path.read_text()
    data = yaml.safe_load(text)
    if "calibration" not in data:
        assert fitted_count(text) == 0
        return
    block = data["calibration"]
    assert block["fitted_parameters"] == fitted_count(text), path.name
    if "transfer" in block.get("method", ""):
        # nothing fitted on this device's own Vidur data; only what --from-db fitted on its own tables (named there)
        assert block["fitted_parameters"] == block.get("from_db", {}).get("fitted_parameters", 0)
        assert "fit by simcast calibrate on ../shared/calibration/vidur," not in text  # cite the source's own files
        carried = sum(
            (2 if "- {" in ln else 1)
            for ln in text.splitlines()
            if "# carried over from" in ln
            and not ln.split("#", 1)[0].strip().endswith(":")  # a value's, not a header's
        )
        assert block["carried_over_parameters"] == carried  # recounted when --from-db replaced carried lines


def _md_rows(text, title):
    """Data rows (lists of cells) of the first table under the ``## title`` heading of a markdown text."""
    sec = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in sec.splitlines() if line.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]


def test_accuracy_summary_holds_every_generated_row():
    """docs/accuracy.md's hand-written summary (above the mark scripts/accuracy.py keeps) quotes every row
    of the generated Vidur tables below it, the weak ones included."""
    root = Path(__file__).resolve().parents[2]
    summary, mark, docs = (root / "docs" / "accuracy.md").read_text().partition("<!-- generated by make accuracy")
    assert mark, "docs/accuracy.md lost the mark between its summary and the generated tables"
    section = summary.split("## Kernels against measured Vidur timings", 1)[1].split("\n## ", 1)[0]
    titles = [
        "Per op",
        "GEMMs and whole layer per TP",
        "GEMMs and whole layer per token band",
        "All-reduce and send/recv",
    ]
    for title in titles:
        rows = _md_rows(docs, title)
        assert rows, title
        for cells in rows:
            med, p90 = cells[-3:-1] if title.startswith("All-reduce") else cells[-2:]
            assert f"{med} / {p90}" in section, (title, cells)  # weak rows included

"""Extract simcast's held-out residuals from the accuracy pages -> simcast/data/intervals/residuals.csv.

The pages hold the comparisons simcast owns on data it never fitted (each page says how its table was made):

* ``docs/serving_accuracy_public.md`` and ``docs/pp_accuracy.md`` — the public vLLM / SGLang development set
  (``benchmarks/serving_devset.py``): one row per configuration and metric;
* ``docs/serving_accuracy.md`` — the published TensorRT-LLM FP8 figures (``benchmarks/serving_published.py``
  on ``../shared/calibration/serving/published_fp8.csv``): static-batch and max-load rows.

Each table row becomes one residual (measured, predicted, engine, device, metric family, load regime); the
prediction intervals (:mod:`simcast.calib.uncertainty.intervals`) are built from this file and nothing else, so
re-running the pages' generators and then this script refreshes them. Also prints the two-fold coverage.

Usage::

    python scripts/intervals.py [--check]   # --check: exit 1 when the CSV is stale
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simcast.calib.uncertainty.intervals import (  # noqa: E402
    LEVEL,
    METRICS,
    REGIMES,
    Residual,
    device_class,
    two_fold_coverage,
)
from simcast.calib.uncertainty.residuals import COLUMNS, residuals_path  # noqa: E402

DEVSET_PAGES = ("docs/serving_accuracy_public.md", "docs/pp_accuracy.md")
TRTLLM_PAGE = "docs/serving_accuracy.md"
# metric column of the dev-set pages -> metric family
DEVSET_METRICS = {
    "median_ttft": "ttft",
    "median_tpot": "tpot",
    "mean_ttft": "ttft",
    "mean_tpot": "tpot",
    "median_e2el": "latency",
    "output_throughput": "throughput",
    "total_throughput": "throughput",
    "speed": "throughput",
}
TRT_GPUS = {"H100-SXM-80GB": "h100_sxm", "H100-SXM-80GB-HBM3": "h100_sxm", "H200-SXM-141GB": "h200_sxm"}
TRT_GPUS["H200-SXM-141GB-HBM3"] = "h200_sxm"
LIGHT_CONCURRENCY = 8  # concurrency at or below which a run counts as light load


def _num(s: str) -> float | None:
    try:
        return float(s.replace(",", "").strip())
    except ValueError:
        return None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def devset_rows(page: str) -> list[Residual]:
    """Residuals of a dev-set page's per-row table (header ``| id | kind | engine | ...``)."""
    out, header = [], None
    for line in (ROOT / page).read_text().splitlines():
        if not line.startswith("| "):
            header = None if not line.strip() else header
            continue
        cells = _cells(line)
        if cells[:3] == ["id", "kind", "engine"]:
            header = cells
            continue
        if header is None or set(cells[0]) <= {"-", " "} or len(cells) != len(header):
            continue
        row = dict(zip(header, cells, strict=True))
        measured, predicted = _num(row["measured"]), _num(row["simcast"])
        family = DEVSET_METRICS.get(row["metric"].split(" ")[0])
        if measured is None or predicted is None or family is None or measured <= 0 or predicted <= 0:
            continue
        kind = row["kind"]
        conc = re.search(r"c=(\d+)", row["workload"])
        if kind == "burst":
            regime = "saturated"
        elif kind == "single" or (conc and int(conc.group(1)) <= LIGHT_CONCURRENCY):
            regime = "light"
        else:
            regime = "loaded"
        device = row["GPU x n"].split(" x ")[0]
        out.append(
            Residual(
                row_id=row["id"],
                source=page,
                engine=row["engine"].split(" ")[0],
                model=row["model"],
                device=device,
                device_class=device_class(device),
                metric=family,
                regime=regime,
                measured=measured,
                predicted=predicted,
            )
        )
    return out


def trtllm_rows(page: str = TRTLLM_PAGE) -> list[Residual]:
    """Residuals of the published TensorRT-LLM page (``| kind | GPU | model | TP | batch | ISL/OSL | ...``)."""
    out = []
    for line in (ROOT / page).read_text().splitlines():
        cells = _cells(line) if line.startswith("| ") else []
        if len(cells) != 9 or cells[1] not in TRT_GPUS:
            continue
        kind, gpu, model, tp, batch, lens, meas, pred, _ = cells
        measured, predicted = _num(meas), _num(pred)
        if measured is None or predicted is None:
            continue
        if kind.startswith("ttft"):
            metric, regime = "ttft", "static"
        elif kind.startswith("static"):
            metric, regime = "throughput", "static"
        else:
            metric, regime = "throughput", "saturated"
        device = TRT_GPUS[gpu]
        out.append(
            Residual(
                row_id=f"trtllm-{kind.split(' ')[0]}-{gpu}-{model}-tp{tp}-b{batch}-{lens}",
                source=page,
                engine="trtllm",
                model=model,
                device=device,
                device_class=device_class(device),
                metric=metric,
                regime=regime,
                measured=measured,
                predicted=predicted,
            )
        )
    return out


def to_csv(rows: list[Residual]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([getattr(r, c) if c not in ("measured", "predicted") else repr(getattr(r, c)) for c in COLUMNS])
    return buf.getvalue()


PAGE = ROOT / "docs" / "uncertainty.md"
BEGIN, END = "<!-- coverage:begin (scripts/intervals.py) -->", "<!-- coverage:end -->"


def coverage_table(rows: list[Residual]) -> str:
    """The two-fold coverage per metric family and load regime, as the page prints it."""
    lines = [
        f"| judged | residuals | inside the {LEVEL:.0%} interval | coverage | median half-width |",
        "| --- | --- | --- | --- | --- |",
    ]
    groups: list[tuple[str, str | None, str | None]] = [("all", None, None)]
    groups += [(f"metric {m}", m, None) for m in METRICS]
    groups += [(f"regime {g}", None, g) for g in REGIMES]
    for label, metric, regime in groups:
        cov = two_fold_coverage(rows, LEVEL, metric, regime)
        if cov.rows:
            lines.append(
                f"| {label} | {cov.rows} | {cov.inside} | {cov.fraction:.0%} | ±{cov.median_half_width_pct:.0f}% |"
            )
    return "\n".join(lines)


def page_with_table(page: str, table: str) -> str:
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped CSV differs from the pages")
    args = ap.parse_args(argv)
    rows = [r for p in DEVSET_PAGES for r in devset_rows(p)] + trtllm_rows()
    text = to_csv(rows)
    path = residuals_path()
    page = page_with_table(PAGE.read_text(), coverage_table(rows))
    if args.check:
        same = path.is_file() and path.read_text() == text and PAGE.read_text() == page
        print(
            "intervals are current"
            if same
            else "residuals.csv or docs/uncertainty.md is stale: run scripts/intervals.py"
        )
        return 0 if same else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    PAGE.write_text(page)
    print(f"{len(rows)} residuals -> {path.relative_to(ROOT)}; coverage table -> docs/uncertainty.md")
    print(coverage_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

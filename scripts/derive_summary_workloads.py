"""Write shipped length distributions that are **approximations from summary statistics** (no per-request
source is public or readable here), in the format of scripts/derive_workloads.py.

Usage:
    python scripts/derive_summary_workloads.py [--out DIR]

Each entry in ``SUMMARIES`` states what its source publishes (means, caps) and what is assumed (the
lognormal shape ``sigma``, the independence of input and output). The distribution: input and output each a
lognormal with the assumed ``sigma``, clipped to ``[1, max]``, whose location is solved so that the clipped
mean equals the published mean; ``GRID`` equal-probability quantile points per axis (midpoints), every pair
one cell of weight 1 (input and output independent: an assumption). Cells are the same
``[rows, input, output]`` rows the loader reads; ``rows`` counts grid points, not source rows, and the
provenance says so. Median, p90, p99 and max are left null in ``source_stats`` unless the source states them.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import yaml

GRID = 40  # quantile points per axis: GRID**2 cells

SUMMARIES: dict[str, dict] = {
    "lmsys_chat_1m": {
        "title": "LMSYS-Chat-1M (approximation from the paper's summary statistics)",
        "source": "LMSYS-Chat-1M (Zheng et al., ICLR 2024, arXiv 2309.11998), Table 1: 1,000,000 conversations, "
        "2.0 turns per sample on average, 69.5 tokens per user prompt and 214.5 tokens per response on average",
        "tokenizer": "as counted in the paper (Llama-2 tokenizer)",
        "filters": "none stated; one request = one user prompt and its response (a single turn, without the "
        "conversation history: --dataset-name multiturn models the history)",
        "input": {"mean": 69.5, "sigma": 1.0, "max": 4096},
        "output": {"mean": 214.5, "sigma": 0.8, "max": 4096},
        "assumptions": "lognormal lengths with shape sigma 1.0 (prompts) and 0.8 (responses), input and output "
        "independent, each clipped at 4096 tokens: the paper publishes means only; the shape and the cap are "
        "assumptions, not measurements",
    },
}


def _points(mean: float, sigma: float, cap: int) -> np.ndarray:
    """GRID equal-probability lognormal quantiles (whole tokens in [1, cap]) whose mean is ``mean``."""
    z = np.array([NormalDist().inv_cdf((k + 0.5) / GRID) for k in range(GRID)])

    def pts(mu: float) -> np.ndarray:
        return np.clip(np.rint(np.exp(mu + sigma * z)), 1, cap)

    lo, hi = math.log(mean) - 5 * sigma, math.log(mean) + 5 * sigma
    for _ in range(200):  # bisection on the location: the clipped, rounded mean is monotone in it
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if pts(mid).mean() < mean else (lo, mid)
    return pts((lo + hi) / 2).astype(int)


def build(name: str, s: dict) -> dict:
    ins = _points(s["input"]["mean"], s["input"]["sigma"], s["input"]["max"])
    outs = _points(s["output"]["mean"], s["output"]["sigma"], s["output"]["max"])
    cells: dict[tuple[int, int], int] = {}
    for i in ins:
        for o in outs:
            cells[(int(i), int(o))] = cells.get((int(i), int(o)), 0) + 1
    return {
        "name": name,
        "title": s["title"],
        "provenance": {
            "source": s["source"],
            "tokenizer": s["tokenizer"],
            "filters": s["filters"],
            "approximation": "approximation from summary statistics: " + s["assumptions"],
            "rows": sum(cells.values()),
            "derived_by": f"scripts/derive_summary_workloads.py: {GRID} x {GRID} equal-probability quantile points "
            "(rows counts grid points, not source rows)",
        },
        "source_stats": {
            "input_tokens": {"mean": s["input"]["mean"], "median": None, "p90": None, "p99": None, "max": None},
            "output_tokens": {"mean": s["output"]["mean"], "median": None, "p90": None, "p99": None, "max": None},
        },
        "bins_per_octave": 0,
        "max_total_tokens": 0,
        "cells": [[n, i, o] for (i, o), n in sorted(cells.items())],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="simcast/data/workloads")
    a = ap.parse_args()
    for name, s in SUMMARIES.items():
        doc = build(name, s)
        head = (
            f"# {doc['title']}: written by scripts/derive_summary_workloads.py (see docs/workloads.md).\n"
            "# APPROXIMATION from summary statistics (provenance.approximation): not a histogram of source rows.\n"
            "# cells: [grid points, input tokens, output tokens].\n"
        )
        cells = doc.pop("cells")
        body = yaml.safe_dump(doc, sort_keys=False, width=120, default_flow_style=False)
        body += "cells:\n" + "".join(f"  - [{n}, {i}, {o}]\n" for n, i, o in cells)
        Path(a.out, f"{name}.yaml").write_text(head + body)
        print(f"wrote {name}.yaml: {len(cells)} cells")


if __name__ == "__main__":
    main()

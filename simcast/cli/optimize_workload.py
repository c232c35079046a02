"""The workload of ``simcast optimize``: fixed lengths or a shipped length distribution (``--dataset-name``)."""

from __future__ import annotations

import argparse
from typing import Any

from simcast.core.errors import require


def optimize_workload(a: argparse.Namespace) -> tuple[Any, Any]:
    """(Workload, LengthDistribution | None) from ``--dataset-name`` or the fixed lengths."""
    from simcast.serving.model import Workload

    budget = a.max_batched_tokens or 0
    if a.dataset_name in (None, "random"):
        require(
            a.input_length is not None and a.output_length is not None,
            "--input-length/--output-length",
            f"{a.input_length}/{a.output_length}",
            "both are required unless --dataset-name names a shipped distribution",
        )
        return (
            Workload(
                input_length=a.input_length,
                output_length=a.output_length,
                max_batched_tokens=budget,
                prefix_hit_rate=getattr(a, "prefix_hit_rate", 0.0),
            ),
            None,
        )
    from simcast.inputs.workloads import load_distribution

    dist = load_distribution(a.dataset_name)
    require(
        a.input_length is None and a.output_length is None,
        "--input-length/--output-length",
        f"{a.input_length}/{a.output_length}",
        f"not with --dataset-name {a.dataset_name} (its lengths come from the distribution)",
    )
    p, i, o = dist.support()
    return (
        Workload(
            input_length=max(1, round(dist.mean_input_tokens)),
            output_length=max(1, round(dist.mean_output_tokens)),
            max_batched_tokens=budget,
            length_mix=tuple((float(w), int(x), int(y)) for w, x, y in zip(p, i, o)),
            name=a.dataset_name,
            prefix_hit_rate=getattr(a, "prefix_hit_rate", 0.0),
        ),
        dist,
    )

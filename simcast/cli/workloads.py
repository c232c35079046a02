"""CLI wiring for ``simcast workloads``: the shipped length distributions of ``bench-serve --dataset-name``."""

from __future__ import annotations

import argparse
from typing import Any

from simcast.cli.catalog import CatalogFlags
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import emit, emit_json, run_metadata


def add_workloads_args(p: argparse.ArgumentParser) -> None:
    add_option_flags(p, CatalogFlags, ("workloads_json",))


def cmd_workloads(a: argparse.Namespace) -> int:
    from simcast.inputs.workloads import load_shipped, shipped_workloads

    rows: list[dict[str, Any]] = []
    for name in shipped_workloads():
        w = load_shipped(name)
        d = w.distribution
        rows.append(
            {
                "name": name,
                "title": w.title,
                "mean_input_tokens": round(d.mean_input_tokens, 1),
                "mean_output_tokens": round(d.mean_output_tokens, 1),
                "cells": len(d.weights),
                "source_stats": w.source_stats,
                "provenance": d.provenance,
            }
        )
    if a.json:
        emit_json({"run": run_metadata(), "workloads": rows})
        return 0
    head = ("dataset", "rows", "mean in", "p50 in", "p90 in", "mean out", "p50 out", "p90 out", "tokenizer")
    table: list[tuple[str, ...]] = [head]

    def stat(v: Any) -> str:
        return "-" if v is None else f"{v:g}"  # not published by the source

    for r in rows:
        si, so, prov = r["source_stats"]["input_tokens"], r["source_stats"]["output_tokens"], r["provenance"]
        table.append(
            (
                r["name"] + (" *" if prov.get("approximation") else ""),
                "-" if prov.get("approximation") else str(prov["rows"]),
                f"{r['mean_input_tokens']:.1f}",
                stat(si["median"]),
                stat(si["p90"]),
                f"{r['mean_output_tokens']:.1f}",
                stat(so["median"]),
                stat(so["p90"]),
                str(prov["tokenizer"]).split(" (")[0],
            )
        )
    widths = [max(len(row[k]) for row in table) for k in range(len(head))]
    for row in table:
        emit("  ".join(c.ljust(w) if k in (0, 8) else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths))))
    emit("\nmeans are of the shipped histogram (equal to the source's within 0.1 token); p50/p90: the source's own.")
    if any(r["provenance"].get("approximation") for r in rows):
        emit(
            "* approximation from summary statistics (the source publishes means only; the shape is assumed): "
            + "; ".join(
                f"{r['name']}: {r['provenance']['approximation']}" for r in rows if r["provenance"].get("approximation")
            )
        )
    emit("use: simcast bench-serve --dataset-name NAME ...; sources and derivation: docs/workloads.md")
    for r in rows:
        emit(f"  {r['name']}: {r['provenance']['source']}")
    return 0

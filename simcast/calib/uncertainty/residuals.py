"""The shipped table of held-out residuals (edge module: reads ``simcast/data/intervals/residuals.csv``).

``scripts/intervals.py`` writes the table from the accuracy pages; :mod:`simcast.calib.uncertainty.intervals` turns it
into prediction intervals. The file ships with the package, so an installed simcast states its intervals
without the repository.
"""

from __future__ import annotations

import csv
import io
from functools import lru_cache
from pathlib import Path

from simcast.calib.uncertainty.intervals import Residual
from simcast.inputs.files import package_data_dir, read_text

COLUMNS = ("row_id", "source", "engine", "model", "device", "device_class", "metric", "regime", "measured", "predicted")


def residuals_path() -> Path:
    """``simcast/data/intervals/residuals.csv`` of the installed package."""
    return package_data_dir("intervals") / "residuals.csv"


@lru_cache(maxsize=1)
def shipped_residuals() -> tuple[Residual, ...]:
    """Every residual of the shipped table (read once per process)."""
    text = read_text(residuals_path(), "simcast/data/intervals/residuals.csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    return tuple(
        Residual(
            row_id=r["row_id"],
            source=r["source"],
            engine=r["engine"],
            model=r["model"],
            device=r["device"],
            device_class=r["device_class"],
            metric=r["metric"],
            regime=r["regime"],
            measured=float(r["measured"]),
            predicted=float(r["predicted"]),
        )
        for r in rows
    )

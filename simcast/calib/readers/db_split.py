"""Database bookkeeping shared by the kernel fits: the held-out split, error summaries and version folders.

The split is a CRC32 of each row's shape columns: odd = held out, even = fitted on, so a shape
and its neighbours land on both sides and the same rows stay held out run after run.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from simcast.calib.readers import aic_db


def held_out(df: pd.DataFrame) -> np.ndarray:
    """True for the held-out half: a CRC32 of the row's shape columns is odd (every other shape)."""
    cols = [
        c
        for c in (
            "kind",
            "dtype",
            "m",
            "n",
            "k",
            "batch",
            "q_len",
            "kv_len",
            "heads",
            "kv_heads",
            "head_dim",
            "bytes",
            "gpus",
            "tokens",  # MoE and all-to-all rows (simcast.calib.fitting.from_db_moe)
            "hidden",
            "inter",
            "topk",
            "experts",
            "tp",
            "ep",
            "mode",
            "phase",
        )
        if c in df
    ]

    def text(v: object) -> str | None:  # integral numbers print as ints, so a mixed frame hashes like its parts
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            return str(int(v))
        return str(v)

    keys = (
        "|".join(t for t in (text(v) for v in row) if t is not None)
        for row in df[cols].itertuples(index=False, name=None)
    )
    return np.array([zlib.crc32(k.encode()) % 2 == 1 for k in keys], dtype=bool)


def version_key(v: str) -> tuple:
    try:
        from packaging.version import Version

        return (0, Version(v))
    except Exception:  # noqa: BLE001 - any unparsable version sorts first
        return (-1, v)


def newest(system: str, kind: str, engine: str, table: str) -> str | None:
    """The newest non-reserved version folder of ``system/kind/engine`` holding ``table``."""
    root = aic_db.data_root()
    vs = [
        v
        for v in aic_db.versions(system, kind, engine)
        if (root / system / kind / engine / v / f"{table}.parquet").is_file()
    ]
    return max(vs, key=version_key) if vs else None


def errors(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    e = np.abs(np.asarray(pred) / np.asarray(meas) - 1) * 100
    return float(np.median(e)), float(np.percentile(e, 90))

"""vLLM decode attention on Hopper: fit on vLLM's own FlashAttention-3 tables, and measure cross-version transfer.

Usage (needs the optional extra and an ai-dynamo/aiconfigurator checkout; the wheel ships only each engine's
newest version, and on H100/H200 vLLM's newest, 0.24.0, is reserved):

    git clone https://github.com/ai-dynamo/aiconfigurator AIC && git -C AIC checkout 095f58a5
    python scripts/vllm_hopper_decode.py AIC/aic-core/src/aiconfigurator_core/systems/data [MODE ...]

MODE: ``hopper``, ``blackwell`` (the default pair), ``write``, ``fit``, ``shipped`` (the shipped profiles scored).

The tables read (ai-dynamo/aiconfigurator@095f58a5): ``{h100_sxm,h200_sxm}/attention/vllm/{0.14.0,0.18.0,0.19.0}``
(kernel_source ``vllm_flash_attn``: vLLM's FlashAttention backend, FA3 on SM90), SGLang 0.5.14's ``fa3`` rows
(today's proxy), and the Blackwell vLLM tables 0.14.0-0.24.0. The reserved folders (H100/H200 vLLM 0.24.0) and
the suspected ones (H100/H200 vLLM 0.22.0, whose ``reuse.yaml`` names 0.24.0) are refused by
:func:`simcast.calib.readers.aic_db.guard` whatever the data folder.

Prints, per system and KV dtype: the same-version odd half (fit on shapes whose CRC32 is even), and the error
of a fit on one table (version / engine) predicting another of the same kernel family (each sampled to SAMPLE rows)
(test rows restricted to the fit's head sizes), as ``median / p90 (signed median)`` in %; ``write`` measures the
KV-cache write (:func:`hopper_write`, :func:`blackwell_write`); ``fit`` prints the decode lines (vLLM 0.19.0 even
half plus the write) that ``device_profiles/{h100_sxm,h200_sxm}.yaml`` carry.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pandas as pd

from simcast.calib.fitting.fit_decode import fit_decode
from simcast.calib.fitting.fit_kernels import _attn_arrays
from simcast.calib.readers import aic_db
from simcast.calib.readers.db_split import held_out
from simcast.cost.kernels import attention as attn
from simcast.inputs.loaders import load_device

SAMPLE = 4000
"""Rows per fitting / test set (random_state 0): the transfer cells need not see every row."""
HOPPER = {"h100_sxm": "h100_sxm", "h200_sxm": "h200_sxm"}
BLACKWELL = {"b200_sxm": "b200", "gb200": "gb200", "gb300": "gb300", "b300_sxm": "b300"}
SM_COUNT = {"h100_sxm": 132, "h200_sxm": 132, "b200_sxm": 148, "gb200": 152, "gb300": 160, "b300_sxm": 148}


def rows(system: str, engine: str, version: str, dtype: str, op: str | None = None) -> pd.DataFrame:
    """Decode rows of one table and KV dtype; its main kernel (or ``op``)."""
    r = aic_db.attention_rows(system, engine, version, system)
    r = r[(r.kind == "attention_decode") & (r.dtype == dtype)]
    r = r[r.op == (op or r.op.value_counts().idxmax())]
    return r.assign(v_head_dim=r["head_dim"])


def _sample(r: pd.DataFrame) -> pd.DataFrame:
    return r.sample(min(len(r), SAMPLE), random_state=0)


def score(fit, dev, test: pd.DataFrame, dtype: str) -> str:
    a = _attn_arrays(test)
    peak = dev.matmul_peak("fp8" if dtype == "fp8" else "bf16")
    p = attn.decode_time_s(fit, peak, dev.hbm_bw_bytes_per_s, a["b"], a["kv"], a["h"], a["hkv"], a["d"], a["dv"])
    e = p / a["t"] - 1
    return f"{np.median(np.abs(e)) * 100:.1f} / {np.percentile(np.abs(e), 90) * 100:.1f} ({np.median(e) * 100:+.1f})"


def transfer(system: str, dev, dtype: str, fit_rows: pd.DataFrame, test: pd.DataFrame) -> str:
    test = test[test.head_dim.isin(fit_rows.head_dim.unique())]
    fit, _ = fit_decode(_sample(fit_rows), dev, dtype, SM_COUNT[system])
    return score(fit, dev, _sample(test), dtype)


def odd_half(system: str, dev, dtype: str, r: pd.DataFrame) -> str:
    h = held_out(r)
    fit, _ = fit_decode(r[~h], dev, dtype, SM_COUNT[system])
    return score(fit, dev, r[h], dtype)


SHAPE = ["batch", "heads", "kv_heads", "head_dim", "kv_len"]


def write_s(before: pd.DataFrame, after: pd.DataFrame) -> float:
    """Median over shapes in both tables of ``before - after`` (s): the per-call time the ``before`` collection
    timed and ``after`` did not (the KV-cache write, see :data:`simcast.engines.vllm.KV_CACHE_WRITE`)."""
    j = before.groupby(SHAPE).time_s.median().to_frame("a").join(after.groupby(SHAPE).time_s.median(), how="inner")
    return float((j.a - j.time_s).median())


def with_write(fit, extra_s: float, per_elem_s: float = 0.0):
    return dataclasses.replace(fit, kv_write_s=extra_s, kv_write_elem_s=per_elem_s)


def fit_write(before: pd.DataFrame, after: pd.DataFrame) -> tuple[float, float]:
    """(``kv_write_s``, ``kv_write_elem_s``): least absolute deviations of ``before - after`` (same shapes) on
    ``s0 + s1 · batch · kv_heads · 2 · head_dim``, both >= 0."""
    from scipy.optimize import minimize

    j = before.groupby(SHAPE).time_s.median().to_frame("a").join(after.groupby(SHAPE).time_s.median(), how="inner")
    idx = j.index.to_frame()
    x = (idx.batch * idx.kv_heads * 2 * idx.head_dim).to_numpy(float)
    d = (j.a - j.time_s).to_numpy()
    s0 = float(np.median(d))

    def loss(p):
        return float(np.abs(d - abs(p[0]) * 1e-6 - abs(p[1]) * 1e-12 * x).sum())

    r = minimize(loss, [s0 * 1e6, 0.0], method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-12})
    return abs(r.x[0]) * 1e-6, abs(r.x[1]) * 1e-12


def hopper_write(dt: str) -> None:
    """The KV-cache write: measured on one Hopper system (0.14 rows minus 0.19 rows, same shapes), added to the
    other system's 0.19 fit, scored on that system's 0.14 rows (a same-family table whose timed call writes)."""
    d = {s: (rows(s, "vllm", "0.14.0", dt), rows(s, "vllm", "0.19.0", dt)) for s in HOPPER}
    for system in HOPPER:
        other = "h200_sxm" if system == "h100_sxm" else "h100_sxm"
        dev = load_device(HOPPER[system])
        old, new = d[system]
        w_own, w_other = write_s(*d[system]), write_s(*d[other])
        fit, _ = fit_decode(_sample(new), dev, dt, SM_COUNT[system])
        test = _sample(old)
        print(
            f"{system} {dt} write (0.14 - 0.19, same shapes): {w_own * 1e6:.2f} us; 0.19 fit -> 0.14 rows: "
            f"{score(fit, dev, test, dt)}; + {other}'s write {w_other * 1e6:.2f} us: "
            f"{score(with_write(fit, w_other), dev, test, dt)}"
        )


def hopper() -> None:
    for system, profile in HOPPER.items():
        dev = load_device(profile)
        older = ("0.14.0",) if system == "h100_sxm" else ("0.14.0", "0.18.0")
        for dt in ("bf16", "fp8"):
            new = rows(system, "vllm", "0.19.0", dt)
            sgl = rows(system, "sglang", "0.5.14", dt, op="fa3")
            print(f"{system} {dt} vllm 0.19 even -> odd: {odd_half(system, dev, dt, new)}")
            print(
                f"{system} {dt} sglang 0.5.14 fa3 (today's proxy) -> vllm 0.19: {transfer(system, dev, dt, sgl, new)}"
            )
            for v in older:
                old = rows(system, "vllm", v, dt)
                print(f"{system} {dt} vllm {v} -> vllm 0.19: {transfer(system, dev, dt, old, new)}")
            other = "h200_sxm" if system == "h100_sxm" else "h100_sxm"
            cross = transfer(system, dev, dt, rows(other, "vllm", "0.19.0", dt), new)
            print(f"{system} {dt} {other} vllm 0.19 -> vllm 0.19: {cross}")


def blackwell_write() -> None:
    """The same on Blackwell, across the 0.24 collector (its timed call adds ``do_kv_cache_update``): vLLM's
    Triton decode (fp8 KV; the same kernel in 0.22 and 0.24): the write measured on B200 (0.24 - 0.22 rows)
    added to GB200's 0.22 fit, scored on GB200's 0.24 rows."""
    dev = load_device("gb200")
    op = "vllm_triton_attn"
    b22, b24 = rows("b200_sxm", "vllm", "0.22.0", "fp8", op), rows("b200_sxm", "vllm", "0.24.0", "fp8", op)
    g22, g24 = rows("gb200", "vllm", "0.22.0", "fp8", op), rows("gb200", "vllm", "0.24.0", "fp8", op)
    w = -write_s(b22, b24)
    fit, _ = fit_decode(g22, dev, "fp8", SM_COUNT["gb200"])
    print(
        f"gb200 fp8 triton 0.22 fit -> 0.24 rows: {score(fit, dev, g24, 'fp8')}; + b200's write {w * 1e6:.2f} us: "
        f"{score(with_write(fit, w), dev, g24, 'fp8')} (gb200's own write {-write_s(g22, g24) * 1e6:.2f} us)"
    )


def blackwell() -> None:
    """Same kernel family across vLLM versions (FlashInfer's own decode, 0.14-0.22), and the kernel switch
    (0.22 -> 0.24: FlashInfer's trtllm-gen decode)."""
    pairs = {
        "b200_sxm": (("0.19.0", "0.22.0"), ("0.22.0", "0.24.0")),
        "gb200": (("0.14.0", "0.19.0"), ("0.19.0", "0.22.0"), ("0.14.0", "0.22.0"), ("0.22.0", "0.24.0")),
        "gb300": (("0.14.0", "0.19.0"), ("0.19.0", "0.24.0")),
    }
    for system, todo in pairs.items():
        dev = load_device(BLACKWELL[system])
        for dt in ("bf16",):
            for a, b in todo:
                old, new = rows(system, "vllm", a, dt), rows(system, "vllm", b, dt)
                print(f"{system} {dt} vllm {a} -> vllm {b}: {transfer(system, dev, dt, old, new)}")
            print(f"{system} {dt} vllm {todo[-1][1]} even -> odd: {odd_half(system, dev, dt, new)}")


def profile_lines() -> None:
    """The ``engines.vllm.decode`` lines of the H100/H200 profiles: FlashAttention-3 fitted on the even half of
    vLLM 0.19.0's rows (the kernel alone), plus the KV-cache write fitted on the even half of the shapes both
    0.14.0 (write timed) and 0.19.0 (not) hold; scored on the odd halves: 0.19.0 (kernel) and 0.14.0 (with
    the write: the timed call of the 0.14 and 0.24 collections)."""
    for system, profile in HOPPER.items():
        dev = load_device(profile)
        for dt in ("bf16", "fp8"):
            new, old = rows(system, "vllm", "0.19.0", dt), rows(system, "vllm", "0.14.0", dt)
            hn, ho = held_out(new), held_out(old)
            fit, _ = fit_decode(new[~hn], dev, dt, SM_COUNT[system])
            w0, w1 = fit_write(old[~ho], new[~held_out(new)])
            both = with_write(fit, w0, w1)
            print(
                f"{system} {dt}: 0.19 odd half (kernel) {score(fit, dev, new[hn], dt)}; 0.14 odd half: kernel "
                f"{score(fit, dev, old[ho], dt)}, + write {score(both, dev, old[ho], dt)}"
            )
            keep = {f.name: getattr(both, f.name) for f in dataclasses.fields(both)}
            print("  ", {k: v for k, v in keep.items() if v != getattr(type(both), k, None)})


def shipped() -> None:
    """The shipped profiles' ``engines.vllm.decode`` fits scored on the same odd halves as :func:`profile_lines`."""
    for system, profile in HOPPER.items():
        dev = load_device(profile)
        for dt in ("bf16", "fp8"):
            fit = dev.engines["vllm"].decode_fit(dt)
            new, old = rows(system, "vllm", "0.19.0", dt), rows(system, "vllm", "0.14.0", dt)
            print(
                f"{system} {dt} shipped: 0.19 odd half {score(fit, dev, new[held_out(new)], dt)}; "
                f"0.14 odd half {score(fit, dev, old[held_out(old)], dt)}"
            )


if __name__ == "__main__":
    aic_db.use_data_root(sys.argv[1])
    which = sys.argv[2:] or ["hopper", "blackwell"]
    if "hopper" in which:
        hopper()
    if "blackwell" in which:
        blackwell()
    if "shipped" in which:
        shipped()
    if "fit" in which:
        profile_lines()
    if "write" in which:
        for dt in ("bf16", "fp8"):
            hopper_write(dt)
        blackwell_write()

"""Fit a device profile's efficiency and link parameters to measured kernel times.

Pure numpy: Levenberg–Marquardt on ``log(predicted / measured)`` with a
numerical Jacobian in scaled parameters, optionally robust (IRLS towards the
L1 norm, so a few noisy measurements do not pull the fit). The predictions are
the simulator's own: :func:`simcast.cost.ops.compute.roofline_parts` on the FLOPs
and bytes :mod:`simcast.cost.kernels.one_kernel` derives, and :mod:`simcast.cost.comm.time` for
messages. Parameters fitted (all physical, shared by every shape and model):

* GEMM: ``matmul`` (max fraction of peak), ``matmul_half_m_ridge``,
  ``matmul_half_n``, ``matmul_half_k`` (saturation half points), ``memory``
  (HBM fraction) and ``launch_overhead_s``;
* other kernels: ``vector_memory``;
* each link: ``latency_s`` and ``efficiency`` from point-to-point messages,
  and per collective and group size an ``α`` latency and ``β`` bus bandwidth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simcast.core.device import CollectiveFit, DeviceSpec, Efficiency, LinkSpec, LinkTable
from simcast.cost.comm.collectives import factor
from simcast.cost.kernels import one_kernel as kernels
from simcast.cost.ops.compute import launch_s, roofline_parts

GEMM_PARAMS = ("matmul", "matmul_half_m_ridge", "matmul_half_n", "matmul_half_k", "memory", "launch_overhead_s")
_BOUNDS = {
    "matmul": (0.2, 1.0),
    "matmul_half_m_ridge": (1e-3, 20.0),
    "matmul_half_n": (1e-3, 2e4),
    "matmul_half_k": (1e-3, 2e4),
    "memory": (0.2, 1.0),
    "launch_overhead_s": (1e-7, 3e-5),
}
_X0 = {
    "matmul": 0.8,
    "matmul_half_m_ridge": 0.3,
    "matmul_half_n": 200.0,
    "matmul_half_k": 100.0,
    "memory": 0.85,
    "launch_overhead_s": 4e-6,
}
ELEMENTWISE_KINDS = ("rms_norm", "add", "silu_and_mul", "rope")


def least_squares(
    residual: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    robust: bool = False,
    iters: int = 60,
) -> np.ndarray:
    """Minimise ``Σ r(x)²`` (or ``Σ |r(x)|`` when ``robust``) within box bounds by Levenberg–Marquardt."""
    x = np.clip(np.asarray(x0, float), lo, hi)
    scale = np.maximum(np.abs(x), 1e-12)
    lam = 1e-2

    def weights(r: np.ndarray) -> np.ndarray:
        return 1.0 / np.sqrt(np.maximum(np.abs(r), 0.01)) if robust else np.ones_like(r)

    def cost(r: np.ndarray) -> float:
        return float(np.sum(np.abs(r)) if robust else np.sum(r * r))

    r = residual(x)
    for _ in range(iters):
        w = weights(r)
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            h = x.copy()
            dx = 1e-4 * scale[j]
            h[j] = h[j] + dx if h[j] + dx <= hi[j] else h[j] - dx
            jac[:, j] = (residual(h) - r) / (h[j] - x[j]) * scale[j]
        jw, rw = jac * w[:, None], r * w
        a, g = jw.T @ jw, jw.T @ rw
        improved = False
        while lam < 1e8:
            step = -np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), g) * scale
            xn = np.clip(x + step, lo, hi)
            rn = residual(xn)
            if cost(rn) < cost(r):
                x, r, lam, improved = xn, rn, max(lam / 3, 1e-7), True
                break
            lam *= 4
        if not improved or np.max(np.abs(step / scale)) < 1e-7:
            break
    return x


def _with_eff(dev: DeviceSpec, **kw: float) -> DeviceSpec:
    return dataclasses.replace(dev, efficiency=dataclasses.replace(dev.efficiency, **kw))


# ------------------------------------------------------------------ compute
@dataclass(frozen=True, kw_only=True)
class _Work:
    flops: np.ndarray
    bytes: np.ndarray
    mnk: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    unit: str
    time_s: np.ndarray
    dtype: str


def _gemm_work(rows: pd.DataFrame, dev: DeviceSpec) -> _Work:
    preds = [
        kernels.gemm(dev, int(m), int(n), int(k), str(dt))
        for m, n, k, dt in zip(rows["m"], rows["n"], rows["k"], rows["dtype"])
    ]
    mnk = (rows["m"].to_numpy(float), rows["n"].to_numpy(float), rows["k"].to_numpy(float))
    return _Work(
        flops=np.array([p.flops for p in preds]),
        bytes=np.array([p.bytes for p in preds]),
        mnk=mnk,
        unit="cube",
        time_s=rows["time_s"].to_numpy(float),
        dtype=str(rows["dtype"].iloc[0]),
    )


def _elementwise_work(rows: pd.DataFrame, dev: DeviceSpec) -> _Work:
    from simcast.calib.validation.validate import predict_row

    preds = [predict_row(r, dev)[0] for r in rows.to_dict("records")]
    return _Work(
        flops=np.array([p.flops for p in preds]),
        bytes=np.array([p.bytes for p in preds]),
        mnk=None,
        unit="vec",
        time_s=rows["time_s"].to_numpy(float),
        dtype=str(rows["dtype"].iloc[0]),
    )


def model_time_s(work: _Work, dev: DeviceSpec) -> np.ndarray:
    """The roofline time of every row (vectorised through the simulator's ``roofline_parts``)."""
    t_c, t_m = roofline_parts(work.flops, work.bytes, work.unit, dev, work.dtype, work.mnk)
    return np.maximum(t_c, t_m) + launch_s(dev, work.unit)


def gemm_fit_dtype(gemm_rows: pd.DataFrame) -> str:
    """The dtype whose GEMM rows the efficiency curve is fitted on: bf16 when measured, else the most common."""
    counts = gemm_rows["dtype"].astype(str).value_counts()
    return "bf16" if "bf16" in counts else str(counts.index[0])


def fit_compute(rows: pd.DataFrame, dev: DeviceSpec) -> tuple[Efficiency, dict[str, float]]:
    """Fit the GEMM parameters on ``gemm`` rows, then ``vector_memory`` on elementwise rows.

    The profile holds one efficiency curve for every dtype, each dtype at its own peak: it is fitted on
    the rows of one dtype (:func:`gemm_fit_dtype`); rows of other dtypes are left for a held-out check.
    Returns the fitted :class:`Efficiency` and the median abs % error per group fitted.
    """
    g = rows[rows["kind"] == "gemm"]
    if len(g):
        g = g[g["dtype"] == gemm_fit_dtype(g)]
    errors: dict[str, float] = {}
    eff = dev.efficiency
    if len(g):
        work = _gemm_work(g, dev)
        lo = np.array([_BOUNDS[p][0] for p in GEMM_PARAMS])
        hi = np.array([_BOUNDS[p][1] for p in GEMM_PARAMS])

        def resid(x: np.ndarray) -> np.ndarray:
            return np.log(model_time_s(work, _with_eff(dev, **dict(zip(GEMM_PARAMS, x)))) / work.time_s)

        x = least_squares(resid, np.array([_X0[p] for p in GEMM_PARAMS]), lo, hi)
        eff = dataclasses.replace(eff, **{p: float(v) for p, v in zip(GEMM_PARAMS, x)})
        errors["gemm"] = float(np.median(np.abs(np.exp(resid(x)) - 1)) * 100)
    e = rows[rows["kind"].isin(ELEMENTWISE_KINDS)]
    if len(e):
        dev2 = dataclasses.replace(dev, efficiency=eff)
        work = _elementwise_work(e, dev2)

        def resid_v(x: np.ndarray) -> np.ndarray:
            d = _with_eff(dev2, vector_memory=float(x[0]), vector_launch_overhead_s=float(x[1]))
            return np.log(model_time_s(work, d) / work.time_s)

        x = least_squares(resid_v, np.array([0.5, 3e-6]), np.array([0.02, 0.0]), np.array([1.0, 3e-5]))
        eff = dataclasses.replace(eff, vector_memory=float(x[0]), vector_launch_overhead_s=float(x[1]))
        errors["elementwise"] = float(np.median(np.abs(np.exp(resid_v(x)) - 1)) * 100)
    return eff, errors


# ------------------------------------------------------------------ links
def _fit_alpha_beta(nbytes: np.ndarray, time_s: np.ndarray, factor: float, bw_max: float) -> tuple[float, float, float]:
    """Robust fit of ``t = α + factor · bytes / β``: (α s, β bytes/s, median abs % error)."""

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log((x[0] + factor * nbytes / x[1]) / time_s)

    x = least_squares(
        resid, np.array([1e-5, 0.5 * bw_max]), np.array([0.0, 1e8]), np.array([1e-3, bw_max]), robust=True
    )
    return float(x[0]), float(x[1]), float(np.median(np.abs(np.exp(resid(x)) - 1)) * 100)


def fit_links(rows: pd.DataFrame, dev: DeviceSpec) -> tuple[LinkTable, dict[str, float]]:
    """Fit each link's p2p ``latency_s``/``efficiency`` and per-group-size collective (α, β).

    ``nodes == 1`` rows fit the intra-node link, others the inter-node link.
    Groups without rows keep the profile's values.
    """
    errors: dict[str, float] = {}
    new: dict[str, LinkSpec] = {}
    for name, link, cross in (("intra_node", dev.links.intra_node, False), ("inter_node", dev.links.inter_node, True)):
        sel = rows[(rows["nodes"].fillna(1) > 1) == cross]
        p = sel[sel["kind"] == "p2p"]
        if len(p):
            a, b, err = _fit_alpha_beta(
                p["bytes"].to_numpy(float), p["time_s"].to_numpy(float), 1.0, link.bw_bytes_per_s
            )
            link = dataclasses.replace(link, latency_s=a, efficiency=min(b / link.bw_bytes_per_s, 1.0))
            errors[f"{name}.p2p"] = err
        # a group size refitted here replaces every regime the profile had for it (a piecewise curve
        # from --from-db becomes this one α + bytes/β fit); other group sizes keep all their regimes
        fits: dict[tuple[str, int], list[CollectiveFit]] = {}
        for f in link.collectives:
            fits.setdefault((f.kind, f.gpus), []).append(f)
        for (kind, gpus), grp in sel[sel["kind"].isin(("allreduce", "allgather"))].groupby(["kind", "gpus"]):
            n = int(gpus)
            ck = "all_reduce" if kind == "allreduce" else "all_gather"
            a, b, err = _fit_alpha_beta(
                grp["bytes"].to_numpy(float), grp["time_s"].to_numpy(float), factor(ck, n), 4 * link.bw_bytes_per_s
            )
            fits[(ck, n)] = [CollectiveFit(kind=ck, gpus=n, latency_s=a, bus_bw_bytes_per_s=b)]
            errors[f"{name}.{ck}.{n}"] = err
        ordered = tuple(f for key in sorted(fits) for f in fits[key])
        new[name] = dataclasses.replace(link, collectives=ordered)
    links = dataclasses.replace(dev.links, intra_node=new["intra_node"], inter_node=new["inter_node"])
    return links, errors


def calibrate(rows: pd.DataFrame, dev: DeviceSpec) -> tuple[DeviceSpec, dict[str, float]]:
    """Fit everything the rows cover; returns the new device and median abs % error per fitted group."""
    from simcast.calib.validation.validate import with_generic_columns

    rows = with_generic_columns(rows)  # a GEMM-only CSV has no nodes/gpus/bytes columns
    eff, e1 = fit_compute(rows, dev)
    links, e2 = fit_links(rows, dev)
    return dataclasses.replace(dev, efficiency=eff, links=links), {**e1, **e2}


def transfer(src: DeviceSpec, dst: DeviceSpec) -> DeviceSpec:
    """Carry ``src``'s fitted (dimensionless) efficiencies to ``dst``'s own peaks and links.

    Efficiency fractions, half points and launch overhead are copied (same kernels);
    the M half point is relative to the ridge, so it moves with ``dst``'s peak / HBM bandwidth.
    Link latencies are copied; efficiencies and collective bus bandwidths scale with the
    ratio of ``dst``'s to ``src``'s link bandwidth.
    """

    def link(s: LinkSpec, d: LinkSpec) -> LinkSpec:
        ratio = d.bw_bytes_per_s / s.bw_bytes_per_s
        return dataclasses.replace(
            d,
            latency_s=s.latency_s,
            efficiency=s.efficiency,
            collectives=tuple(
                dataclasses.replace(f, bus_bw_bytes_per_s=f.bus_bw_bytes_per_s * ratio) for f in s.collectives
            ),
        )

    links = dataclasses.replace(
        dst.links,
        intra_node=link(src.links.intra_node, dst.links.intra_node),
        inter_node=link(src.links.inter_node, dst.links.inter_node),
    )
    keep = {f.name: getattr(src.efficiency, f.name) for f in dataclasses.fields(Efficiency)}
    return dataclasses.replace(dst, efficiency=Efficiency(**keep), links=links)

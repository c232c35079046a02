"""``simcast calibrate --from-db aiconfigurator``: fit engine kernels and NCCL fits from the database.

For one system and engine: select the tables (:mod:`simcast.calib.readers.aic_db`, which
refuses the reserved ones), convert them to the generic measured schema, split
them into a fitting half and a held-out half by a hash of the shape (every
other shape; the split is stated in provenance and docs), fit on the first
half and report the error on the second, per kernel kind.

Where the database has no table of the engine's own on that system (vLLM GEMM
and attention on H100/H200 exist only in the reserved tables), a *proxy* table
of the same kernel family stands in and is named in provenance:

* bf16 GEMM: TensorRT-LLM's (both run ``torch.nn.functional.linear`` = cuBLAS;
  on B200/B300/GB200/A100 vLLM's and TensorRT-LLM's bf16 GEMM tables agree to a
  median 1-5 %); fp8 and fp8-block GEMM: SGLang's (CUTLASS per-tensor fp8 kernels
  adapted from vLLM's; DeepGEMM block-scaled);
* attention: SGLang's FlashAttention-3 rows (vLLM's default attention backend on
  Hopper is FlashAttention-3 as well), their head-192 decode rows costed as keys 192 / values 128
  (``kernel_choices.DIFF_KV_HEAD_DIM``). The shipped H100/H200 vLLM *decode* lines are not this proxy's:
  ``scripts/vllm_hopper_decode.py`` fits them on vLLM's own 0.19.0 / 0.14.0 FlashAttention-3 tables from an
  ai-dynamo/aiconfigurator checkout (the wheel no longer ships them; ``simcast.engines.vllm.KV_CACHE_WRITE``),
  so a re-run of this calibration on the wheel alone brings the proxy back: re-run that script after it.

NCCL's own all-reduce is fitted on the system's NCCL table. For h100_sxm and
h200_sxm every non-reserved NCCL table lacks all-reduce or holds rows tagged with
the reserved NCCL version; their NCCL fit is *transferred*: B200's NCCL 2.29.2
piecewise fit, bus bandwidths scaled by the ratio of this system's to B200's
large-message (>= 64 MiB) all-reduce bandwidth as measured in the engines' own
all-reduce tables (past their custom-kernel cutoff every engine calls NCCL).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simcast.calib.fitting import fit_collectives as fc
from simcast.calib.fitting import fit_decode as fd_mod
from simcast.calib.fitting import fit_kernels as fk
from simcast.calib.fitting.from_db_moe import fit_moe_engine
from simcast.calib.fitting.kernel_choices import (
    DIFF_KV_HEAD_DIM,
    DIFF_KV_OPS,
    DIFF_KV_V_HEAD_DIM,
    GEMM_FAMILIES,
    GEMM_L2_EDGE,
    GEMM_TILE_RULE_OF,
)
from simcast.calib.readers import aic_db
from simcast.calib.readers.db_split import errors, held_out, newest
from simcast.core.device import CollectiveFit, DeviceSpec
from simcast.core.errors import SimcastInputError, require
from simcast.core.kernel_fits import DecodeAttentionFit, EngineKernels, GemmFit, PrefillAttentionFit
from simcast.engines import ENGINES, get_engine


@dataclass(frozen=True, kw_only=True)
class SystemInfo:
    """An aiconfigurator system, the simcast profile it calibrates and its SM count (cited)."""

    profile: str
    sm_count: int
    sm_source: str


SYSTEMS: dict[str, SystemInfo] = {
    "h100_sxm": SystemInfo(
        profile="h100_sxm", sm_count=132, sm_source="H100 SXM5: 132 SMs (NVIDIA H100 whitepaper, 2022)"
    ),
    "h200_sxm": SystemInfo(
        profile="h200_sxm",
        sm_count=132,
        sm_source="H200: GH100 with 132 SMs, as H100 SXM5 (NVIDIA H200 datasheet / H100 whitepaper)",
    ),
    "b200_sxm": SystemInfo(
        profile="b200",
        sm_count=148,
        sm_source="B200: 148 SMs (CUDA device properties, e.g. DeepGEMM/CUTLASS Blackwell notes)",
    ),
    "b300_sxm": SystemInfo(
        profile="b300",
        sm_count=160,
        sm_source="B300 (Blackwell Ultra): 160 SMs (NVIDIA 'Inside Blackwell Ultra' developer blog, Hot Chips 2025)",
    ),
    "gb200": SystemInfo(
        profile="gb200", sm_count=148, sm_source="GB200's Blackwell GPU: 148 SMs, as B200 (CUDA device properties)"
    ),
    "gb300": SystemInfo(
        profile="gb300",
        sm_count=160,
        sm_source="GB300's Blackwell Ultra GPU: 160 SMs, as B300 (NVIDIA 'Inside Blackwell Ultra' developer blog, "
        "Hot Chips 2025)",
    ),
    "a100_sxm": SystemInfo(
        profile="a100_sxm_80gb", sm_count=108, sm_source="A100 SXM4: 108 SMs (NVIDIA A100 whitepaper, 2020)"
    ),
    "l40s": SystemInfo(
        profile="l40s", sm_count=142, sm_source="L40S: 142 SMs (18,176 CUDA cores / 128 per SM, NVIDIA L40S datasheet)"
    ),
}

PROXY_GEMM = {"bf16": "trtllm", "fp16": "trtllm", "fp8": "sglang", "fp8_block": "sglang", "nvfp4": "trtllm"}
HOST_BOUND = {("vllm", "fp8_block")}
"""(engine, GEMM family) tables timed *without* CUDA graphs: vLLM's collector passes
``use_cuda_graph=gemm_type != "fp8_block"`` (ai-dynamo/aiconfigurator collector/vllm/collect_gemm.py), so
its fp8-block rows are ``max(GPU time, host launch path)`` (~0.16-0.3 ms at small shapes), which no
graph-captured table shows. Such rows cannot show the graph-captured kernel: its device time and launch
come from the family's graph-captured proxy table (SGLang's DeepGEMM rows; vLLM's collector forces
DeepGEMM too, ``VLLM_USE_DEEP_GEMM=1``), and the rows give only the eager host floor (``host_floor_s``),
applied to steps the engine does not capture (:mod:`simcast.engines.cuda_graphs`)."""
HOST_BOUND_NEXT_PROXY = "trtllm"
"""Graph-captured proxy of a host-bound family when the first proxy has no such rows on the system (L40S:
SGLang's table has no fp8-block GEMMs; TensorRT-LLM's block-scaled fp8 GEMMs stand in)."""
HOST_FLOOR_DONORS = {("vllm", "fp8_block"): ("b200_sxm", "b300_sxm")}
"""Where the engine's own host-bound rows of a system are reserved (H100/H200 vLLM), the floor comes from
its own rows on these x86 HGX systems."""
PROXY_ATTENTION = ("sglang", ("fa3",))


def _main_kernel(rows: pd.DataFrame) -> pd.DataFrame:
    """Keep each kind's and dtype's main kernel (the one with most rows: the engine's default on that GPU)."""
    out = []
    for _, g in rows.groupby(["kind", "dtype"]):
        top = g["op"].value_counts().idxmax()
        out.append(g[g["op"] == top])
    return pd.concat(out, ignore_index=True) if out else rows


@dataclass(frozen=True, kw_only=True)
class EngineData:
    """The rows an engine section is fitted on, and where they came from."""

    gemm: pd.DataFrame
    attention: pd.DataFrame
    all_reduce: pd.DataFrame
    tables: tuple[str, ...]
    proxies: tuple[str, ...]
    eager: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)  # own host-bound rows (HOST_BOUND)


def engine_data(system: str, engine: str, version: str | None = None) -> EngineData:
    """Rows for one engine on one system (own tables, else the proxies above)."""
    info = SYSTEMS[system]
    tables: list[str] = []
    proxies: list[str] = []
    gemm = []
    own = version or newest(system, "gemm", engine, "gemm_perf")
    eager = pd.DataFrame()
    if own:
        rows = aic_db.gemm_rows(system, engine, own, info.profile)
        host = rows["dtype"].isin([f for e, f in HOST_BOUND if e == engine])
        gemm.append(rows[~host])
        eager = rows[host].reset_index(drop=True)
        tables.append(f"{system}/gemm/{engine}/{own}/gemm_perf")
        if len(eager):
            fams = "/".join(sorted(set(eager["dtype"])))
            tables.append(f"{system}/gemm/{engine}/{own}/gemm_perf {fams} rows (timed without CUDA graphs: host floor)")
    have = set(gemm[0]["dtype"]) if gemm else set()
    for fam in GEMM_FAMILIES:
        if fam in have:
            continue
        for donor in (PROXY_GEMM[fam],) + ((HOST_BOUND_NEXT_PROXY,) if (engine, fam) in HOST_BOUND else ()):
            dv = newest(system, "gemm", donor, "gemm_perf")
            if donor == engine or dv is None:
                continue
            rows = aic_db.gemm_rows(system, donor, dv, info.profile)
            rows = rows[rows["dtype"] == fam]
            if len(rows):
                gemm.append(rows.assign(engine=engine))
                proxies.append(f"gemm {fam}: {system}/gemm/{donor}/{dv} (proxy, same kernel family)")
                break
    att_v = version or newest(system, "attention", engine, "context_attention_perf")
    if att_v:
        att = _main_kernel(aic_db.attention_rows(system, engine, att_v, info.profile))
        tables.append(f"{system}/attention/{engine}/{att_v}/{{context,generation}}_attention_perf")
    else:
        donor, ops = PROXY_ATTENTION
        dv = newest(system, "attention", donor, "context_attention_perf")
        att = pd.DataFrame()
        if dv and donor != engine:
            att = aic_db.attention_rows(system, donor, dv, info.profile)
            att = att[att["op"].isin(ops)].assign(engine=engine)
            proxies.append(
                f"attention: {system}/attention/{donor}/{dv} {'/'.join(ops)} rows (proxy: FlashAttention-3, "
                f"vLLM's default on Hopper)"
            )
    if len(att):
        diff = (att["kind"] == "attention_decode") & att["op"].isin(DIFF_KV_OPS) & (att["head_dim"] == DIFF_KV_HEAD_DIM)
        att = att.assign(v_head_dim=np.where(diff, DIFF_KV_V_HEAD_DIM, att["head_dim"]))
        if diff.any():
            (proxies if proxies and proxies[-1].startswith("attention:") else tables).append(
                f"{int(diff.sum())} decode rows of head size {DIFF_KV_HEAD_DIM} costed as keys {DIFF_KV_HEAD_DIM} / "
                f"values {DIFF_KV_V_HEAD_DIM} (MiMo-V2's attention)"
            )
    ar_v = newest(system, "comm", engine, "custom_allreduce_perf")
    ar = pd.DataFrame()
    if ar_v:
        ar = aic_db.custom_allreduce_rows(system, engine, ar_v, info.profile)
        tables.append(f"{system}/comm/{engine}/{ar_v}/custom_allreduce_perf (CUDA-graph rows)")
    return EngineData(
        gemm=pd.concat(gemm, ignore_index=True) if gemm else pd.DataFrame(),
        attention=att,
        all_reduce=ar,
        tables=tuple(tables),
        proxies=tuple(proxies),
        eager=eager,
    )


def _small(r: pd.DataFrame, family: str) -> pd.DataFrame:
    return r[(r["dtype"] == family) & (r["m"] <= 16) & (r["n"] <= 1024) & (r["k"] <= 1024)]


def host_floor(engine: str, family: str, own: pd.DataFrame | None = None) -> tuple[float, str] | None:
    """(seconds, provenance) of an engine's eager (no CUDA graph) GEMM floor: the median of its own host-bound
    rows with M <= 16, N, K <= 1024 (``own``: the system's fitting half), else of the donor systems' rows."""
    if (engine, family) not in HOST_BOUND:
        return None
    lat, used = [], []
    if own is not None and len(_small(own, family)):
        lat = list(_small(own, family)["time_s"])
        used = [f"{own['source'].iloc[0].split('/', 1)[1].rsplit('/', 1)[0]} (fitting half)"]
    for system in () if lat else HOST_FLOOR_DONORS.get((engine, family), ()):
        v = newest(system, "gemm", engine, "gemm_perf")
        if v is None:
            continue
        lat += list(_small(aic_db.gemm_rows(system, engine, v, system), family)["time_s"])
        used.append(f"{system}/gemm/{engine}/{v}")
    if not lat:
        return None
    t = float(np.median(lat))
    return t, (
        f"gemm {family} host_floor_s {t * 1e6:.0f} us (eager steps only; captured steps use the proxy fit's "
        f"launch_s): median of {engine}'s own {family} GEMMs with M <= 16, N, K <= 1024 on {', '.join(used)} "
        "(timed without CUDA graphs)"
    )


def fit_gemms(
    system: str, engine: str, dev: DeviceSpec, data: EngineData
) -> tuple[list[GemmFit], dict[str, tuple[float, float]], EngineData]:
    """The engine's GEMM fits per family on the fitting half of ``data``; (fits, {kind: (median, p90) held-out %
    error}, ``data`` with any host-floor provenance added)."""
    from simcast.cost.kernels.gemm import PEAK_DTYPE, gemm_time_s

    info = SYSTEMS[system]
    errs: dict[str, tuple[float, float]] = {}
    gemms: list[GemmFit] = []
    for fam in GEMM_FAMILIES:
        rows = data.gemm[data.gemm["dtype"] == fam] if len(data.gemm) else data.gemm
        if len(rows) < 50:
            continue
        h = held_out(rows)
        rule = GEMM_TILE_RULE_OF.get((system, str(rows["op"].iloc[0])), "")
        g, _ = fk.fit_gemm(
            rows[~h], dev, fam, info.sm_count, {"tile_rule": rule} if rule else None, l2_edge=system in GEMM_L2_EDGE
        )
        peak = dev.matmul_peak(PEAK_DTYPE[fam])
        t = rows[h]
        errs[f"gemm.{fam}"] = errors(gemm_time_s(g, peak, dev.hbm_bw_bytes_per_s, t["m"], t["n"], t["k"]), t["time_s"])
        eager = data.eager[data.eager["dtype"] == fam] if len(data.eager) else data.eager
        he = held_out(eager) if len(eager) else np.zeros(0, dtype=bool)
        floor = host_floor(engine, fam, eager[~he] if len(eager) else None)
        if floor is not None:
            g = dataclasses.replace(g, host_floor_s=floor[0])
            data = dataclasses.replace(data, proxies=data.proxies + (floor[1],))
            if len(eager):  # the eager model max(device, floor) on the engine's own held-out host-bound rows
                e = eager[he]
                p = gemm_time_s(g, peak, dev.hbm_bw_bytes_per_s, e["m"], e["n"], e["k"], captured=False)
                errs[f"gemm.{fam}.eager"] = errors(p, e["time_s"])
        gemms.append(g)
    return gemms, errs, data


def fit_engine(
    system: str, engine: str, dev: DeviceSpec, version: str | None = None
) -> tuple[EngineKernels, dict[str, tuple[float, float]], EngineData]:
    """Fit one engine section on the fitting half; (kernels, {kind: (median, p90) held-out % error}, data)."""
    require(system in SYSTEMS, "--system", system, f"allowed: {', '.join(SYSTEMS)}")
    require(engine in ENGINES, "--engine", engine, f"allowed: {', '.join(ENGINES)}")
    info, eng = SYSTEMS[system], get_engine(engine)  # eng: the kernel choices each system's fit may declare
    data = engine_data(system, engine, version)
    errs: dict[str, tuple[float, float]] = {}
    pre: list[PrefillAttentionFit] = []
    dec: list[DecodeAttentionFit] = []
    from simcast.cost.kernels import attention as attn

    gemms, gemm_errs, data = fit_gemms(system, engine, dev, data)
    errs.update(gemm_errs)
    for dt in ("bf16", "fp8"):
        for kind in ("attention_prefill", "attention_decode"):
            rows = (
                data.attention[(data.attention["kind"] == kind) & (data.attention["dtype"] == dt)]
                if len(data.attention)
                else data.attention
            )
            if len(rows) < 50:
                continue
            h = held_out(rows)
            a = fk._attn_arrays(rows[h])
            peak = dev.matmul_peak("fp8" if dt == "fp8" else "bf16")
            if kind == "attention_prefill":
                fp, _ = fk.fit_prefill(
                    rows[~h],
                    dev,
                    dt,
                    sm_count=info.sm_count if system in eng.prefill_kernel_rules else 0,
                    kernel_rules=eng.prefill_kernel_rules.get(system, ("",)),
                    l2_edge=system in eng.prefill_l2_edge,
                )
                p = attn.prefill_time_s(
                    fp, peak, dev.hbm_bw_bytes_per_s, a["b"], a["q"], a["c"], a["h"], a["hkv"], a["d"]
                )
                pre.append(fp)
            else:
                rules = eng.decode_kernel_rules.get(system, ("",))
                if dt == "fp8" and system in eng.decode_fp8_single_block:
                    rules = tuple("trtllm_xqa_sb" if r == "trtllm_xqa_mb" else r for r in rules)
                edge = system in eng.decode_l2_edge
                fd, _ = fd_mod.fit_decode(rows[~h], dev, dt, info.sm_count, rules, l2_edge=edge)
                p = attn.decode_time_s(
                    fd, peak, dev.hbm_bw_bytes_per_s, a["b"], a["kv"], a["h"], a["hkv"], a["d"], a["dv"]
                )
                dec.append(fd)
            errs[f"{kind.split('_')[1]}.{dt}"] = errors(p, a["t"])
    ar: tuple[CollectiveFit, ...] = ()
    if len(data.all_reduce):
        h = held_out(data.all_reduce)
        ar, _ = fc.fit_all_reduce(data.all_reduce[~h], names=("one_shot", "two_shot", "nccl"))
        t = data.all_reduce[h]
        errs["all_reduce"] = errors(fc.predict_all_reduce(ar, t), t["time_s"])
    moe, a2a, moe_errs, moe_tables = fit_moe_engine(system, engine, dev, info.sm_count)
    errs.update(moe_errs)
    data = dataclasses.replace(data, tables=data.tables + moe_tables)
    src = f"aiconfigurator-core {aic_db.package_version()} {system}: " + "; ".join(data.tables + data.proxies)
    return (
        EngineKernels(
            engine=engine,
            gemm=tuple(gemms),
            prefill=tuple(pre),
            decode=tuple(dec),
            all_reduce=ar,
            moe=moe,
            all_to_all=a2a,
            source=src,
        ),
        errs,
        data,
    )


# ------------------------------------------------------------------ NCCL
def nccl_fits(system: str) -> tuple[tuple[CollectiveFit, ...], dict[str, tuple[float, float]], str]:
    """NCCL's own all-reduce on ``system``: piecewise fits, held-out errors ({} for a transfer), provenance note.

    Fitted on the even half of the system's own NCCL table; without a usable one (h100_sxm, h200_sxm), the
    transfer of :mod:`simcast.calib.fitting.nccl_transfer` (donor chosen by a held-out check on other systems),
    below 1 MiB replaced by the bridge from the system's own reduce-scatter + all-gather rows where it has them
    (:mod:`simcast.calib.fitting.nccl_bridge`).
    """
    from simcast.calib.fitting import nccl_bridge, nccl_transfer

    got = nccl_transfer.own_rows(system)
    if got is not None:
        rows, ver = got
        h = held_out(rows)
        fits, _ = fc.fit_all_reduce(rows[~h], names=nccl_transfer.NAMES)
        t = rows[h]
        return (
            fits,
            {"nccl.all_reduce": errors(fc.predict_all_reduce(fits, t), t["time_s"])},
            f"aiconfigurator-core {aic_db.package_version()} {system}/comm/nccl/{ver}/nccl_perf all_reduce (fit half)",
        )
    if not nccl_transfer.engine_tables_bw(system)[0]:
        raise SimcastInputError("--system", system, "has neither an NCCL all-reduce table nor engine all-reduce tables")
    bridged = nccl_bridge.bridge(system)
    fits, note = bridged if bridged is not None else nccl_transfer.transfer(system)[:2]
    return fits, {}, f"aiconfigurator-core {aic_db.package_version()}: {note}"

"""The database part of `make accuracy`: engine kernels of the shipped profiles vs aiconfigurator-core.

Split: each table's rows whose shape hashes odd (CRC32) are held out; the shipped profiles were fitted
on the even half (`simcast calibrate --from-db aiconfigurator`). Targets (the issue's): median <= 10 %,
p90 <= 25 % per kernel kind. Reserved tables (h100_sxm / h200_sxm vllm 0.24.0 GEMM and attention,
NCCL 2.29.2) are never read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcast.render.text import markdown_table

DEVICES = [
    ("h100_sxm", "h100_sxm"),
    ("h200_sxm", "h200_sxm"),
    ("b200_sxm", "b200"),
    ("b300_sxm", "b300"),
    ("gb200", "gb200"),
    ("gb300", "gb300"),
    ("a100_sxm", "a100_sxm_80gb"),
    ("l40s", "l40s"),
]
FP4_ONLY = {"gb300"}
"""Profiles whose engine sections hold only the NVFP4 GEMM / MoE fits (scripts/fit_fp4_from_db.py): only their
FP4 column is a held-out check; their other kinds run on priors and are not listed."""
KINDS = [
    ("gemm", "bf16", "GEMM bf16"),
    ("gemm", "fp8", "GEMM fp8"),
    ("gemm", "fp8_block", "GEMM fp8-block"),
    ("gemm", "nvfp4", "FP4 GEMM (nvfp4)"),
    ("attention_prefill", "bf16", "prefill bf16"),
    ("attention_decode", "bf16", "decode bf16"),
    ("attention_prefill", "fp8", "prefill fp8"),
    ("attention_decode", "fp8", "decode fp8"),
    ("allreduce", "bf16", "engine all-reduce"),
]


OWN_TABLE_ELSEWHERE = {(p, "vllm", "attention_decode") for p in ("h100_sxm", "h200_sxm")}
"""(profile, engine, kind) cells whose fit comes from tables the wheel does not ship (vLLM's own Hopper
FlashAttention-3 rows, 0.14.0 and 0.19.0, from an ai-dynamo/aiconfigurator checkout: scripts/vllm_hopper_decode.py):
the cell is the profile's recorded held-out error, not recomputed here."""


def _profile_err(prof: str, engine: str, key: str) -> str:
    from simcast.inputs.loaders import profiles_dir, read_yaml

    m, p = read_yaml(profiles_dir() / f"{prof}.yaml", "--device")["engines"][engine]["fit_abs_err_pct"][key]
    return f"{m:.1f} / {p:.1f}"


def _cell(t: pd.DataFrame) -> str:
    if not len(t):
        return "–"
    r = t.iloc[0]
    return f"{r.median_abs_err_pct:.1f} / {r.p90_abs_err_pct:.1f}"


def db_markdown() -> list[str]:
    """Markdown lines for docs/accuracy.md — no tables when the extra is missing."""
    from simcast.calib.readers import aic_db

    if not aic_db.available():
        return [
            "## Engine kernels vs the aiconfigurator-core database",
            "",
            "Not regenerated: the optional extra is not installed (pip install 'simcast[measured]').",
            "",
        ]
    from simcast.calib.validation import db_accuracy as dba
    from simcast.inputs.loaders import load_device

    version = aic_db.package_version()
    md = [
        "## Engine kernels vs the aiconfigurator-core database",
        "",
        f"aiconfigurator-core {version}. Each table's rows are split by a CRC32 hash of the shape: the shipped "
        "profiles were fitted on the even half (`simcast calibrate --from-db aiconfigurator --system S "
        "--engine all`) and every number below is on the odd half, through `simcast validate`'s own per-row "
        "path. Cells: median / p90 absolute % error. Targets: median <= 10 %, p90 <= 25 %.",
        "",
        "Proxies (named in each profile's provenance): on h100_sxm and h200_sxm the database's only vLLM GEMM and "
        "attention tables are the reserved ones, so the vLLM section is fitted on TensorRT-LLM's bf16 GEMMs "
        "(both cuBLAS via torch), SGLang's fp8 and fp8-block GEMMs and SGLang's FlashAttention-3 attention rows; "
        "the vllm rows below are therefore those proxy tables' held-out halves, not vLLM measurements, but for "
        "the decode cells marked †: those are fitted on vLLM's own FlashAttention-3 rows of the 0.19.0 tables plus "
        "its separate KV-cache write (fitted on 0.14.0 minus 0.19.0 at the same shapes), tables the wheel no "
        "longer ships (ai-dynamo/aiconfigurator checkout, `scripts/vllm_hopper_decode.py`); the cell is 0.14.0's "
        "odd half (its timed call writes the cache, as the 0.24.0 collector's does), from the profile. "
        "NCCL's own all-reduce: no H100/H200 NCCL table is usable, so h100_sxm's and h200_sxm's links carry a "
        "transfer from another NVSwitch system, its donor chosen by a held-out check (NCCL section below).",
        "",
    ]
    grid = []
    for system, prof in DEVICES:
        dev = load_device(prof)
        t = dba.held_out_errors(system, dev)
        n = dba.nccl_errors(system, dev)
        for e in sorted(t["engine"].unique()):
            row = {"device": prof, "engine": e}
            for kind, dt, label in KINDS:
                fp4_only = prof in FP4_ONLY and dt != "nvfp4"
                row[label] = "–" if fp4_only else _cell(t[(t.engine == e) & (t.kind == kind) & (t.dtype == dt)])
                if (prof, e, kind) in OWN_TABLE_ELSEWHERE:
                    row[label] = _profile_err(prof, e, f"decode.{dt}") + " †"
            grid.append(row)
        if len(n) and prof not in FP4_ONLY:
            md_n = n.assign(device=prof)
            db_fit = any(f.algorithm.startswith("nccl") for f in dev.links.intra_node.collectives)
            grid.append(
                {
                    "device": prof,
                    "engine": "nccl: link fit (own table)" if db_fit else "nccl: Vidur link fit vs own table",
                    **{label: "–" for *_, label in KINDS},
                    "engine all-reduce": " ".join(
                        f"{int(r.gpus)}:{r.median_abs_err_pct:.1f}/{r.p90_abs_err_pct:.1f}" for r in md_n.itertuples()
                    ),
                }
            )
    g = pd.DataFrame(grid)
    md += [
        "### Held-out error per device, engine and kernel kind",
        "",
        markdown_table(g),
        "",
        "gb300's engine sections hold only NVFP4 GEMM and MoE fits (`scripts/fit_fp4_from_db.py gb300`, the same "
        "even-half split): its FP4 GEMM cells are held-out checks, its other kernels run on priors (not listed).",
        "",
        "vLLM's fp8-block GEMM cells are its graph-captured DeepGEMM proxy rows (SGLang's table; TensorRT-LLM's "
        "on L40S): vLLM's own fp8-block rows are timed without CUDA graphs (host-bound, ~0.2-0.4 ms at small "
        'shapes) and checked against max(fit, host floor) under "Host-bound rows and CUDA graphs".',
        "",
        "TensorRT-LLM's decode cells on h100_sxm, h200_sxm, a100_sxm_80gb and l40s use two declared kernel "
        "families (`kernel_rule: trtllm_xqa_mb` in the profile; L40S fp8 `trtllm_xqa_sb`, below), chosen per "
        "launch by the engine's own rule "
        "(`simcast.cost.kernels.attention.xqa_runs`, from TensorRT-LLM's "
        "`decoderXQAImplJIT`/`kernelUtils.cpp`): XQA for "
        "GQA groups 2-32 and head sizes <= 256 when `4 · kv_heads · batch · max(1, history / 128) >= SMs` or the "
        "KV cache is fp8, else masked MHA (vanilla MHA and groups > 32 always). Both run in multi-block mode, "
        "each request's context cut into sub-sequences as the engine sizes them (XQA `computeMultiBlockCount`, "
        "masked MHA `multi_block_grid_setup`), costed as whole waves of CTAs with fitted fixed and per-token "
        "times (docs/model.md); on Blackwell the engine runs its trtllm-gen kernels and one kernel is fitted. "
        "With an fp8 KV cache below SM90 the engine turns XQA's multi-block mode off (TensorRT-LLM "
        "`attentionOp.cpp` `convertMMHAParamsToXQAParams`), so L40S fp8 declares `trtllm_xqa_sb`: XQA one CTA "
        "per request and KV head over the whole context (before, with `trtllm_xqa`: 12.4 / 46.3). Both L40S "
        "TensorRT-LLM decode fits take the capacity form of the L2 term (`l2_edge`, as SGLang's and vLLM's; "
        "bf16 before: 10.0 / 32.8). "
        "On h100_sxm and h200_sxm the fp8 cells add a fitted fixed time per XQA launch whose cached head row is "
        "under 128 bytes (head 64 with fp8 KV: Hopper XQA's 64-byte K/V parts, and the collector's attention "
        "sinks at head 64; `narrow_launch_s`, docs/model.md); before it they were 10.6 / 24.2 and 10.9 / 23.7, "
        "the head-64 rows running ~15 % over the fit.",
        "",
        "vLLM's decode cell on a100_sxm_80gb uses FlashAttention-2's varlen decode launch as vLLM calls it "
        "(`kernel_rule: fa2_varlen` in the profile; `simcast.cost.kernels.flash_decode`, from flash-attn's "
        "`mha_varlen_fwd`): no split of the context for vanilla MHA (group 1), the GQA group folded into the "
        "query rows and split, and the copies the fold costs outside the kernel (the output always; the query"
        " with >= 2 requests and >= 2 KV heads); before: 9.7 / 37.7 (its group-1 rows; docs/model.md). The "
        "same rule is a fit candidate for vLLM on l40s, where its bf16 rows time FlashAttention-2 too: chosen"
        " on the fitting half with the L2 capacity form, 9.5 / 33.6 -> 6.8 / 25.8 (its fp8 rows time "
        "FlashInfer and keep one kernel). SGLang's decode cells on h100_sxm and h200_sxm "
        "(and vLLM's, from this proxy, before its † fit) "
        "include the FlashAttention-3 table's head-192 decode rows, MiMo-V2's keys of 192 and values of 128 "
        "elements (1114 rows per dtype per table), costed as such: bytes and FLOPs of keys 192 / values 128 "
        "and a fitted fixed time per launch with distinct head sizes (`diff_kv_launch_s`: h100 8.5 us bf16, "
        "10.2 us fp8; h200 8.3 / 9.9 us; `simcast.cost.kernels.diff_kv`, docs/model.md), refitted on the even half. "
        "Held-out, with those rows: h100 bf16 7.9 / 24.7 -> 7.1 / 20.4, fp8 9.1 / 25.9 -> 8.2 / 21.4; h200 "
        "bf16 8.4 / 23.7 -> 7.5 / 20.0, fp8 8.7 / 26.3 -> 7.9 / 22.2 (the previous merge left the rows out: "
        "7.1 / 20.8, 8.0 / 22.0, 7.4 / 20.1, 7.8 / 22.9 without them). The head-192 rows alone: h100 bf16 6.2"
        " / 17.2, fp8 4.7 / 17.1; h200 7.4 / 18.6, 5.5 / 16.3 (as 192/192 rows under the old all-rows fit "
        "they were ~32-34 % median, ~44-47 % p90 on h100); the other head sizes 7.1 / 20.6, 8.4 / 21.6 (h100)"
        " and 7.5 / 20.0, 8.0 / 22.6 (h200). TensorRT-LLM's h100/h200/l40s tables hold the same shapes (1177 "
        "decode rows per dtype) and keep one head size: their times run at or above the 192/192 fit (h100 "
        "held out, head-192 rows: bf16 9.3 / 28.5 as 192/192, 12.8 / 31.2 as 192/128 without a refit), as XQA"
        " pads head 192 to 256 (docs/model.md).",
        "",
        "SGLang's and vLLM's decode cells on l40s use the capacity form of the L2 term (`l2_edge` in the "
        "profile: the tables' KV pool runs from L2 up to ~100 MiB and from GDDR6 past it; before: sglang bf16"
        " 17.8 / 61.7, fp8 8.7 / 36.4, vllm bf16 13.1 / 47.5, fp8 9.3 / 36.3), and SGLang's bf16 cell "
        "FlashInfer's tensor-core / CUDA-core choice (`kernel_rule: flashinfer_tc`, from SGLang's "
        "`should_use_tensor_core`; 7.7 / 34.2 with the L2 form alone); the a100_sxm_80gb fits keep the smooth"
        " L2 form (vLLM's A100 cell: the paragraph above). TensorRT-LLM's L40S decode cells: above.",
        "",
        "GEMM cells on l40s, b200, b300 and gb200 (bf16 on Blackwell) use the capacity form of the L2 term "
        "(`l2_edge` in the profile, a fit candidate on those systems kept where it lowers the fitting half's "
        "mean abs log error by 3 %: all eight L40S GEMM fits and the nine Blackwell bf16 fits; the other "
        "Blackwell fits keep the smooth form and, but for vLLM's fp8 on b200 and gb200, are unchanged), "
        "SGLang's and vLLM's L40S fp8 cells their kernels' SM89 tile rules (`tile_rule: sgl_fp8_sm89`, "
        "`vllm_fp8_sm89`; vLLM's with the L2 form alone 9.8 / 29.2); vLLM's fp8 cells on b200 and gb200 run "
        "vLLM's SM100 CUTLASS tiles (`tile_rule: vllm_fp8_sm100`, with the capacity form; before 8.4 / 30.5 "
        "and 7.2 / 22.5; b300, SM103, keeps one grid). Before (smooth L2 form, one 128×128 grid): l40s sglang"
        " bf16 11.5 / 35.8, fp8 11.0 / 39.8; trtllm bf16 11.1 / 36.5, fp8 7.0 / 25.4, fp8-block 9.1 / 31.7; "
        "vllm bf16 11.6 / 35.5, fp8 10.4 / 31.3, fp8-block 9.1 / 31.7; bf16 b200 sglang 8.1 / 26.0, trtllm "
        "7.6 / 23.9, vllm 7.2 / 22.4; b300 sglang 8.0 / 25.4, trtllm 8.2 / 24.7, vllm 7.4 / 23.5; gb200 "
        "sglang 7.8 / 25.1, trtllm 7.7 / 24.4, vllm 7.5 / 26.0. On L40S SGLang's fp8 with the L2 form alone "
        "(no tile rule): 10.1 / 38.4 on the fit's own path (`gemm_time_s`, without the padding envelope), "
        "against 9.2 / 33.1 with the rule.",
        "",
        "TensorRT-LLM's decode cells take the multi-block envelope (`simcast.cost.kernels.xqa_launch`, docs/model.md:"
        " the engine's multi-block count falls as requests are added, so a launch takes the least of its own "
        "time and the engine's time on more requests like its own); it moved h100 fp8 8.4 / 23.5 -> 8.5 / "
        "23.8, h200 bf16 8.2 / 22.9 -> 8.3 / 23.0, fp8 8.6 / 23.4 -> 8.7 / 23.8, a100 bf16 8.6 -> 8.7 % "
        "median; the transfer rows below were computed before it.",
        "",
    ]
    # transfer checks
    md += [
        "### Transfer checks",
        "",
        "Fit on one engine, predict another engine's own tables (all rows), and fit on H100, predict H200 and "
        "B200 from their own peaks (engine sections carried over with `transfer_engines`: fractions, half "
        "points and fixed times kept, SM count and link bandwidth of the target; GEMM tile rules kept too, so on B200 "
        "the Hopper kernels' tile choice stands in for its own builds' dispatch). TensorRT-LLM's H100 fp8 decode "
        "fit carries its narrow-head XQA launch time along: it moves the H200 cell from 10.9 / 23.9 to 8.7 / 23.1 "
        "and the B200 cell from 24.1 / 62.0 to 25.0 / 68.5 (Blackwell runs trtllm-gen, not XQA).",
        "",
    ]
    tr = []
    b200 = load_device("b200")
    for fit_e, test_e in (("trtllm", "vllm"), ("sglang", "vllm"), ("vllm", "sglang")):
        tr.append(dba.cross_engine("b200_sxm", b200, fit_e, test_e))
    tr.append(dba.cross_engine("h100_sxm", load_device("h100_sxm"), "sglang", "trtllm"))
    tr.append(dba.cross_engine("a100_sxm", load_device("a100_sxm_80gb"), "sglang", "vllm"))
    tr.append(dba.cross_engine("a100_sxm", load_device("a100_sxm_80gb"), "trtllm", "vllm"))
    md += [markdown_table(pd.concat([x for x in tr if len(x)], ignore_index=True)), ""]
    h100 = load_device("h100_sxm")
    cd = [
        dba.cross_device(h100, load_device("h200_sxm"), "h200_sxm", ("sglang", "trtllm")),
        dba.cross_device(h100, b200, "b200_sxm", ("sglang", "trtllm")),
    ]
    md += [markdown_table(pd.concat([x for x in cd if len(x)], ignore_index=True)), ""]
    from accuracy_nccl import nccl_markdown

    md += nccl_markdown()
    md += moe_markdown()
    return md


MOE_DEVICES = [
    ("h100_sxm", "h100_sxm"),
    ("h200_sxm", "h200_sxm"),
    ("b200_sxm", "b200"),
    ("b300_sxm", "b300"),
    ("gb200", "gb200"),
    ("a100_sxm", "a100_sxm_80gb"),
    ("l40s", "l40s"),
]
MOE_TARGET_PCT = 20.0


def moe_markdown() -> list[str]:
    """MoE kernels: held-out shapes per system and engine, B200's fits on B300/GB200 and H100's on H200."""
    from simcast.calib.validation import db_accuracy_moe as dam
    from simcast.engines import ENGINES
    from simcast.inputs.loaders import load_device

    devs = [(s, load_device(p)) for s, p in MOE_DEVICES]
    held = dam.held_out_table(devs, ENGINES)
    b200 = dict(devs)["b200_sxm"]
    tr = pd.concat(
        [
            dam.transfer_table(b200, [(s, d) for s, d in devs if s in ("b300_sxm", "gb200")], ENGINES),
            dam.transfer_table(dict(devs)["h100_sxm"], [("h200_sxm", dict(devs)["h200_sxm"])], ENGINES),
        ],
        ignore_index=True,
    )
    med = float(np.median(held["median_abs_err_pct"])) if len(held) else float("nan")
    md = [
        "### MoE kernels: routed experts and DeepEP all-to-all",
        "",
        "Fitted by `simcast calibrate --from-db` on the `moe_perf` tables (balanced routing, each engine's main "
        "fused-MoE kernel per expert format) and the DeepEP dispatch/combine tables (vLLM and TensorRT-LLM "
        "`moe_a2a_perf`, SGLang `wideep_deepep_{ll,normal}_perf`; normal = high-throughput mode at DeepEP's "
        "default 20 SMs, low latency = LL mode; 16-bit payloads, 8 ranks in one node) of every system, "
        "h100_sxm and h200_sxm included (none of their MoE or DeepEP tables is among the reserved ones). "
        "Formulas: `simcast.cost.kernels.moe_kernels`: per expert format either the saturation form (efficiency "
        "saturating in rows per expert) or the tile/wave form (each active expert's rows padded to the kernel's "
        "M tile of 16-128 rows, the tiles of both grouped GEMMs run in waves over the SMs), whichever fits the "
        "even half better (`block_m` in the profile; 0 = saturation), plus a routing term per routed (token, "
        "expert) pair of the layer input before the EP filter (`routed_pair_s`: top-k, sort/align and permutation "
        "run over every pair on every rank). Target: held-out median <= "
        f"{MOE_TARGET_PCT:.0f} % (median of the medians below: {med:.1f} %).",
        "",
        "Shapes held out (odd CRC32 half of each table; the profiles were fitted on the even half):",
        "",
        markdown_table(held),
        "",
        "Systems held out (B200's fits on B300 and GB200, H100's on H200, each on the target's own peaks and "
        "bandwidth, every row of its tables):",
        "",
        markdown_table(tr),
        "",
    ]
    return md


PUBLIC_NCCL_CSV = "benchmarks/data/nccl_tests_public.csv"


def _short(url: str) -> str:
    """``owner/repo#N`` for an issue or pull-request URL, ``owner/repo`` for a file."""
    parts = url.removeprefix("https://github.com/").split("/")
    return (
        f"{parts[0]}/{parts[1]}#{parts[3]}"
        if len(parts) > 3 and parts[2] in ("issues", "pull")
        else "/".join(parts[:2])
    )


VIDUR_FIT_BEFORE = ((2, 2.3178e-5, 3.0456e11), (4, 2.8332e-5, 3.6570e11), (8, 3.0516e-5, 3.4839e11))
"""(gpus, latency_s, bus_bw) of the all-reduce fit h100_sxm (and h200_sxm) carried before the NCCL transfer
(device_profiles/h100_sxm.yaml at the parent of commit 4c23e9c: fitted on Vidur's torch.distributed rows)."""


def _before(system: str):
    """``system``'s shipped profile with the intra-node all-reduce fits it carried before the transfer."""
    import dataclasses

    from simcast.core.device import CollectiveFit
    from simcast.inputs.loaders import load_device

    dev = load_device(system)
    fits = tuple(
        CollectiveFit(kind="all_reduce", gpus=g, latency_s=lat, bus_bw_bytes_per_s=bw)
        for g, lat, bw in VIDUR_FIT_BEFORE
    )
    intra = dataclasses.replace(dev.links.intra_node, collectives=fits)
    return dataclasses.replace(dev, links=dataclasses.replace(dev.links, intra_node=intra))


def nccl_public_markdown() -> list[str]:
    """NCCL's own all-reduce of the shipped links on public timings (simcast.calib.validation.public_nccl)."""
    from pathlib import Path

    from simcast.calib.validation import public_nccl as pn
    from simcast.inputs.loaders import load_device

    rows = pn.load(Path(__file__).resolve().parents[1] / PUBLIC_NCCL_CSV)
    pred = pn.predict(rows)
    table = pn.summary(pred)
    hopper = rows[rows.system.isin(("h100_sxm", "h200_sxm"))]
    before = pn.summary(pn.predict(hopper, {s: _before(s) for s in ("h100_sxm", "h200_sxm")}))
    table["sources"] = [" ".join(_short(u) for u in s.split()) for s in table["sources"]]
    donors = pn.donor_check(rows)

    def cell(t: pd.DataFrame, system: str, harness: str, gpus: int = 8) -> pd.Series:
        return t[(t.system == system) & (t.harness == harness) & (t.gpus == gpus)].iloc[0]

    h100, h100_before = cell(table, "h100_sxm", pn.LIKE_FOR_LIKE), cell(before, "h100_sxm", pn.LIKE_FOR_LIKE)
    h200, h200_before = cell(table, "h200_sxm", "torch-eager"), cell(before, "h200_sxm", "torch-eager")
    h100_4, h100_4_before = cell(table, "h100_sxm", pn.LIKE_FOR_LIKE, 4), cell(before, "h100_sxm", pn.LIKE_FOR_LIKE, 4)
    by_target = {t: g.loc[g["median_abs_err_pct"].idxmin()] for t, g in donors.groupby("target")}
    best_h100, best_h200 = by_target["h100_sxm"], by_target["h200_sxm"]
    quoted = table[table.harness.isin(("nccl-tests-tuned", "nccl-tests-cudagraph"))]
    tuned = 1 + quoted["signed_median_pct"] / 100
    b200 = cell(table, "b200", "pynccl-cudagraph", 2)
    keys = ["system", "harness", "gpus", "rows"]
    both = table[table.system != "b200"][keys + ["median_abs_err_pct", "signed_median_pct"]].merge(
        before[keys + ["median_abs_err_pct", "signed_median_pct"]], on=keys, suffixes=("", "_vidur_fit_before")
    )
    bands = pn.band_summary(pred).set_index(["gpus", "band"])
    off = pn.offset_check(rows)
    at = off.set_index(["held_out", "gpus", "band"])
    nv, az = at.loc[("NVIDIA", 8, "<=64KiB")], at.loc[("Azure", 8, "64KiB-8MiB")]
    dp, ml = at.loc[("dudeperf3ct", 4, "<=64KiB")], at.loc[("stas00", 8, "<=64KiB")]
    pyn4 = cell(table, "h100_sxm", "pynccl-cudagraph", 4)
    b8 = [bands.loc[(8, b), "median_abs_err_pct"] for b in ("<=64KiB", "64KiB-8MiB", ">=8MiB")]
    b4 = [bands.loc[(4, b), "median_abs_err_pct"] for b in ("<=64KiB", "64KiB-8MiB", ">=8MiB")]
    from accuracy_nccl import HOPPER, _link_us, transfer_only

    tdev = {s: transfer_only(s) for s in HOPPER}
    tb = pn.band_summary(pn.predict(hopper, tdev)).set_index(["gpus", "band"])
    t8 = [tb.loc[(8, b), "median_abs_err_pct"] for b in ("<=64KiB", "64KiB-8MiB", ">=8MiB")]
    t4 = [tb.loc[(4, b), "median_abs_err_pct"] for b in ("<=64KiB", "64KiB-8MiB", ">=8MiB")]
    h100_dev = load_device("h100_sxm")
    f8, f4 = _link_us(h100_dev, 8, 4096), _link_us(h100_dev, 4, 4096)
    tr8, tr4 = _link_us(tdev["h100_sxm"], 8, 4096), _link_us(tdev["h100_sxm"], 4, 4096)
    return [
        "Public timings (`benchmarks/data/nccl_tests_public.csv`: rows typed from public GitHub issues, pull "
        "requests and results pages, each citing its URL; the sources, and those checked but not usable, in "
        "`benchmarks/data/nccl_tests_public.md`). `harness` says how each source timed NCCL. The judge rows are "
        "nccl-tests `all_reduce_perf` without CUDA graphs, timed like the database tables the fits come from: "
        "`nccl-tests` (default algorithm: 8x H100 1-32 KiB, NVIDIA/nccl #2094, NCCL 2.28 or 2.29.7; 8x H200 "
        "32 KiB-16 GiB, ml-engineering, NCCL 2.30.7; 4x H100 8 B-1 GiB, a blog post, NCCL 2.26.2) and "
        "`nccl-tests-nvls` (NCCL_ALGO=NVLS forced: Azure's ND H100 v5 / ND H200 v5 sweeps, 8 GPUs, 1 KiB-8 GiB, "
        "NCCL 2.18.5 / 2.20.5 / 2.26.2). Where a page gives bus bandwidth only, the time is derived from it. "
        "torch.distributed adds a host launch per call, vLLM's pynccl runs 10 all-reduces per CUDA-graph replay, "
        "and the tuned / CUDA-graph points are best cases quoted in text: context, not judges. No public 2-GPU "
        "nccl-tests row of H100/H200 was found. The shipped links (bridge below 1 MiB, transfer above) on the judge "
        f"rows, median absolute % error per band (<= 64 KiB / 64 KiB-8 MiB / >= 8 MiB): 8 GPUs {b8[0]:.1f} / "
        f"{b8[1]:.1f} / {b8[2]:.1f}, 4 GPUs {b4[0]:.1f} / {b4[1]:.1f} / {b4[2]:.1f} (the transfer alone: "
        f"{t8[0]:.1f} / {t8[1]:.1f} / {t8[2]:.1f} and {t4[0]:.1f} / {t4[1]:.1f} / {t4[2]:.1f}): worse below 8 MiB, "
        "every judge row of H100 below 64 KiB slower than predicted. The public small-message floors differ "
        "between machines more than any fit's error: at 8 GPUs ~18 us (H200, NCCL 2.30.7), 25-31 us (Azure, NVLS "
        "forced, 2.18-2.26) and ~33 us (H100, 2.28 / 2.29.7), against the links' "
        f"{f8:.1f} us at 4 KiB (the database's own H100 rows; the B200 transfer: {tr8:.1f} us); at 4 GPUs ~24 us "
        f"(2.26.2, one process driving 4 GPUs) against {f4:.1f} us ({tr4:.1f} us). Latency-tuned NCCL "
        f"(symmetric memory, CUDA graphs: 2-6 us) is another regime: predicted {tuned.min():.1f}-{tuned.max():.1f}x "
        f"its time. B200's own-table fit on the public B200 rows: {b200.median_abs_err_pct:.1f} % median on vLLM's "
        "2-GPU pynccl rows (0.5-1.5 MiB).",
        "",
        markdown_table(bands.reset_index()),
        "",
        markdown_table(table),
        "",
        "Where the small-message regime should come from, decided on these rows only, holding out one publisher at "
        "a time (Azure's three sweeps and their fork count as one): (a) the links as shipped (bridge); (b) a fit per "
        "group size on the other publishers' rows, possible only at 8 GPUs (4 GPUs has one publisher, 2 GPUs none); "
        "(c) a donor blend or shift. Blending donors cannot help: on the H100 rows every donor is too fast, on "
        "the H200 rows (NCCL 2.30.7) every donor is too slow (table at the end), so a blend of B200 and B300 moves "
        "along the wrong axis. The shift tested: the "
        "shipped links plus a Hopper small-message latency offset, median(measured - predicted) over the other "
        "publishers' 8-GPU judge rows below 1 MiB, added to every group size's `nccl_small` latency (a fit per "
        f"group size at 8 GPUs is the same number). It helps the held-out NVIDIA/nccl #2094 rows "
        f"({nv.transfer_median:.1f} -> {nv.offset_median:.1f} %, offset {nv.offset_us:.1f} us), Azure's 64 KiB-8 MiB "
        f"band ({az.transfer_median:.1f} -> {az.offset_median:.1f} %) and the held-out 4-GPU sweep below 64 KiB "
        f"({dp.transfer_median:.1f} -> {dp.offset_median:.1f} %), but worsens the held-out NCCL 2.30.7 H200 sweep "
        f"({ml.transfer_median:.1f} -> {ml.offset_median:.1f} % below 64 KiB) and, at 4 GPUs, vLLM's pynccl rows "
        f"({pyn4.median_abs_err_pct:.1f} % now, slower than measured: CUDA graphs drop the launch the offset adds). "
        "The public floors disagree among themselves by ~2x, so no offset fits them all; the shipped links follow "
        "the database's own H100/H200 rows (the collector and machine type the database's newer NCCL tables of "
        "these systems come from) and take (a). B200 / B300 / GB200 own-table cells above are untouched. A second "
        "public 4-GPU (or any 2-GPU) nccl-tests sweep, and sweeps of one NCCL version across group sizes, would "
        "decide a Hopper-specific small-message latency.",
        "",
        markdown_table(off),
        "",
        "Against the Vidur-based fit H100/H200 carried until commit 4c23e9c (30.5 us + 348 GB/s bus bandwidth at "
        "8 GPUs, timed through torch.distributed): per set, the shipped links' median and the Vidur fit's (8x H100 "
        f"nccl-tests table {h100.median_abs_err_pct:.1f} % against {h100_before.median_abs_err_pct:.1f} %, 4x H100 "
        f"sweep {h100_4.median_abs_err_pct:.1f} % against {h100_4_before.median_abs_err_pct:.1f} %, 8x H200 "
        f"torch.distributed {h200.median_abs_err_pct:.1f} % against {h200_before.median_abs_err_pct:.1f} %; the "
        "Vidur fit's bandwidth is ring-like where NCCL runs NVLS):",
        "",
        markdown_table(both),
        "",
        "Donor choice checked on the public rows (each candidate carried to H100 / H200 the way the shipped "
        f"transfer is, on the `nccl-tests` rows): {best_h100.donor.split(' ')[0]} is lowest on H100 "
        f"({best_h100.median_abs_err_pct:.1f} %) and {best_h200.donor.split(' ')[0]} on H200 "
        f"({best_h200.median_abs_err_pct:.1f} %), the donor the held-out check above chose.",
        "",
        markdown_table(donors),
        "",
    ]


def nccl_transfer_check() -> pd.DataFrame:
    """The held-out check that picks the NCCL donor of h100_sxm / h200_sxm (simcast.calib.fitting.nccl_transfer)."""
    from simcast.calib.fitting import nccl_transfer

    return nccl_transfer.check(nccl_transfer.donors())

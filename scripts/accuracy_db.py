"""The database part of `make accuracy`: engine kernels of the shipped profiles vs aiconfigurator-core.

Split: each table's rows whose shape hashes odd (CRC32) are held out; the shipped profiles were fitted
on the even half (`simcast calibrate --from-db aiconfigurator`). Targets (the issue's): median <= 10 %,
p90 <= 25 % per kernel kind. Reserved tables (h100_sxm / h200_sxm vllm 0.24.0 GEMM and attention,
NCCL 2.29.2) are never read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcast.calib.validation.validate import markdown_table

DEVICES = [
    ("h100_sxm", "h100_sxm"),
    ("h200_sxm", "h200_sxm"),
    ("b200_sxm", "b200"),
    ("b300_sxm", "b300"),
    ("gb200", "gb200"),
    ("a100_sxm", "a100_sxm_80gb"),
    ("l40s", "l40s"),
]
KINDS = [
    ("gemm", "bf16", "GEMM bf16"),
    ("gemm", "fp8", "GEMM fp8"),
    ("gemm", "fp8_block", "GEMM fp8-block"),
    ("attention_prefill", "bf16", "prefill bf16"),
    ("attention_decode", "bf16", "decode bf16"),
    ("attention_prefill", "fp8", "prefill fp8"),
    ("attention_decode", "fp8", "decode fp8"),
    ("allreduce", "bf16", "engine all-reduce"),
]


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
        "the vllm rows below are therefore those proxy tables' held-out halves, not vLLM measurements. "
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
                row[label] = _cell(t[(t.engine == e) & (t.kind == kind) & (t.dtype == dt)])
            grid.append(row)
        if len(n):
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
        "vLLM's fp8-block GEMM cells are its graph-captured DeepGEMM proxy rows (SGLang's table; TensorRT-LLM's "
        "on L40S): vLLM's own fp8-block rows are timed without CUDA graphs (host-bound, ~0.2-0.4 ms at small "
        'shapes) and checked against max(fit, host floor) under "Host-bound rows and CUDA graphs".',
        "",
        "TensorRT-LLM's decode cells on h100_sxm, h200_sxm, a100_sxm_80gb and l40s use two declared kernel "
        "families (`kernel_rule: trtllm_xqa` in the profile), chosen per launch by the engine's own rule "
        "(`simcast.cost.attention.xqa_runs`, from TensorRT-LLM's `decoderXQAImplJIT`/`kernelUtils.cpp`): XQA for "
        "GQA groups 2-32 and head sizes <= 256 when `4 · kv_heads · batch · max(1, history / 128) >= SMs` or the "
        "KV cache is fp8, else masked MHA (vanilla MHA and groups > 32 always), each with its own fitted per-wave "
        "time; on Blackwell the engine runs its trtllm-gen kernels and one kernel is fitted.",
        "",
    ]
    # transfer checks
    md += [
        "### Transfer checks",
        "",
        "Fit on one engine, predict another engine's own tables (all rows), and fit on H100, predict H200 and "
        "B200 from their own peaks (engine sections carried over with `transfer_engines`: fractions, half "
        "points and fixed times kept, SM count and link bandwidth of the target; GEMM tile rules kept too, so on B200 "
        "the Hopper kernels' tile choice stands in for its own builds' dispatch).",
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
    md += [
        "### NCCL's own all-reduce",
        "",
        "Piecewise `latency + 2(n-1)/n·bytes/bus_bw` per group size (protocol switches fitted as breakpoints). "
        "Systems with a usable NCCL all-reduce table are fitted on its even half (rows above) and the fit is "
        "written into the intra-node link unless the link already holds a fit made on the device's own "
        "measurements: a100_sxm_80gb keeps its Vidur fit (its row above: Vidur times `torch.distributed` calls, "
        "a 45-50 us fixed cost against NCCL-tests' 10-30 us, so small messages differ by 2-3x; at 16-64 MiB the "
        "two are 13-27 % apart). h100_sxm and h200_sxm: every non-reserved NCCL table of theirs lacks all-reduce "
        "(nccl/2.23) or holds rows tagged with the reserved version 2.29.2 (h100 nccl/2.27.3, h200 nccl/2.26.2, "
        "refused by the reader). Their link carries a transfer (simcast.calib.fitting.nccl_transfer): a donor system's "
        "piecewise fit with its latencies kept and its bus bandwidths scaled per group size by the ratio of the "
        "two systems' large-message (>= 64 MiB) all-reduce bandwidth in the engines' own tables. The donor is "
        "chosen by the check below: each NVSwitch system with its own NCCL table predicts every other one (all "
        "rows; `below_1MiB`: messages under 1 MiB, the latency-bound band); the lowest mean median wins. "
        "Public evidence says Hopper's small-message floor is below Blackwell's (NVIDIA/nccl issue #1940: "
        "tuned 8-byte all-reduce 2.3 us on 8x H800/H200 against 3 us on 8x B200; NVIDIA/nccl issue #1259: "
        "~6 us on 2x H100 with NVLSTree and CUDA graphs), so on H100/H200 the transfer may overestimate small "
        "messages; no H100/H200 NCCL table simcast may read can check it.",
        "",
    ]
    md += [markdown_table(nccl_transfer_check()), ""]
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
    from simcast.core.engines import ENGINES
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
        "Formulas: `simcast.cost.moe_kernels`: per expert format either the saturation form (efficiency "
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


def nccl_transfer_check() -> pd.DataFrame:
    """The held-out check that picks the NCCL donor of h100_sxm / h200_sxm (simcast.calib.fitting.nccl_transfer)."""
    from simcast.calib.fitting import nccl_transfer

    return nccl_transfer.check(nccl_transfer.donors())

"""The "NCCL's own all-reduce" section of docs/accuracy.md (part of `make accuracy`, scripts/accuracy_db.py).

Run alone (``python scripts/accuracy_nccl.py``, needs the optional extra aiconfigurator-core) it regenerates
only that section of docs/accuracy.md in place, from its heading to the next ``### `` heading: the rest of
the page is left as the last full `make accuracy` wrote it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from simcast.render.text import markdown_table

HEADING = "### NCCL's own all-reduce"
HOPPER = ("h100_sxm", "h200_sxm")
PROBE_BYTES = (4096, 65536, 524288, 2**20, 4 * 2**20)
"""Message sizes (bytes) at which the H100/H200 links are printed, transfer against bridge."""


def transfer_only(system: str):
    """``system``'s shipped profile with the intra-node NCCL fits of the transfer alone (the links before the
    bridge: simcast.calib.fitting.nccl_transfer)."""
    import dataclasses

    from simcast.calib.fitting import nccl_transfer
    from simcast.inputs.loaders import load_device

    dev = load_device(system)
    intra = dataclasses.replace(dev.links.intra_node, collectives=nccl_transfer.transfer(system)[0])
    return dataclasses.replace(dev, links=dataclasses.replace(dev.links, intra_node=intra))


def _link_us(dev, gpus: int, nbytes: int) -> float:
    from simcast.cost.comm.collectives import piecewise_array_s, regimes

    regs = regimes(dev.links.intra_node.collectives, "all_reduce", gpus)
    return float(piecewise_array_s(regs, "all_reduce", gpus, np.array([float(nbytes)]))[0]) * 1e6


def probe_table() -> pd.DataFrame:
    """The H100/H200 links' all-reduce time (us) at :data:`PROBE_BYTES`: transfer alone, and as shipped."""
    from simcast.inputs.loaders import load_device

    out = []
    for s in HOPPER:
        before, after = transfer_only(s), load_device(s)
        for g in (2, 4, 8):
            for b in PROBE_BYTES:
                out.append(
                    {
                        "system": s,
                        "gpus": g,
                        "bytes": b,
                        "transfer_us": round(_link_us(before, g, b), 1),
                        "shipped_us": round(_link_us(after, g, b), 1),
                    }
                )
    return pd.DataFrame(out)


def bridge_markdown() -> list[str]:
    """The bridge's share per table and group size, and its held-out check (simcast.calib.fitting.nccl_bridge)."""
    from simcast.calib.fitting import nccl_bridge as nb

    k = nb.ratios()
    share = nb.k_per_gpus(k)
    spread = k.groupby("gpus")["k"].agg(["min", "max"])
    wide = k.pivot_table(index=["system", "version"], columns="gpus", values="k").reset_index()
    wide.columns = [f"k_{c}_gpus" if str(c).isdigit() else str(c) for c in wide.columns]
    for c in wide.columns[2:]:
        wide[c] = wide[c].map(lambda v: "-" if pd.isna(v) else f"{v:.3f}")
    check = nb.check()
    br = check[check["fit"] == "bridge"]
    tr = check[check["fit"].str.startswith("transfer")]
    a100 = check[check["table"].str.startswith("a100_sxm")].set_index("fit")
    a100_tr = a100[a100.index.str.startswith("transfer")].iloc[0]
    return [
        "**H100 / H200: the bridge below 1 MiB.** Their NCCL 2.23 tables (`h100_sxm/comm/nccl/2.23/nccl_perf`, "
        "`h200_sxm/comm/nccl/2.23/nccl_perf`) time reduce-scatter and all-gather, not all-reduce, on their own "
        "fabric. On every NVSwitch table that times all three (below), all-reduce takes a nearly fixed share `k` "
        "of reduce-scatter + all-gather below 1 MiB, per group size: "
        + ", ".join(
            f"{g} GPUs {share[g]:.2f} ({spread.loc[g, 'min']:.2f}-{spread.loc[g, 'max']:.2f})" for g in sorted(share)
        )
        + " (median over tables, min-max; A100 at the low end, NCCL 2.23 to 2.29.2 alike). The shipped H100/H200 "
        "links are one piecewise fit on derived rows: `k x (RS + AG)` of their own table below 1 MiB, the "
        "transfer's times from 1 MiB up (there `k` moves with NCCL's protocol and NVLS switches, 0.45-1.0 by size "
        "and version). Held-out check: each table predicted with `k` and the transfer's donor from the other "
        "systems, fitted on the even half of its derived rows, judged on the odd half of its measured all-reduce "
        f"(median / p90 %). Below 1 MiB the bridge is within {br['below_1MiB_median'].min():.1f}-"
        f"{br['below_1MiB_median'].max():.1f} % median (p90 up to {br['below_1MiB_p90'].max():.1f} %), the "
        f"transfer alone {tr['below_1MiB_median'].min():.1f}-{tr['below_1MiB_median'].max():.1f} % (p90 up to "
        f"{tr['below_1MiB_p90'].max():.1f} %); on A100, the one target of another architecture (as Hopper is to "
        f"the Blackwell donors), {a100.loc['bridge', 'below_1MiB_median']:.1f} / "
        f"{a100.loc['bridge', 'below_1MiB_p90']:.1f} % against the transfer's "
        f"{a100_tr['below_1MiB_median']:.1f} / {a100_tr['below_1MiB_p90']:.1f} %. From 1 MiB the bridge follows "
        "the transfer (the one fit spans the 1 MiB seam). Assumption: Hopper's share lies where A100's and "
        "Blackwell's do; the database's collector gives the same small-message all-reduce on GB200 with NCCL "
        "2.23 and 2.29.2 (within ~3 %), so the 2.23 rows stand for the newer NCCL's small messages too.",
        "",
        markdown_table(wide),
        "",
        markdown_table(check.round(1)),
        "",
        "The H100/H200 links, transfer alone against as shipped (us per all-reduce):",
        "",
        markdown_table(probe_table()),
        "",
    ]


def nccl_markdown() -> list[str]:
    """The whole section: method, the transfer's donor check, the bridge, the public timings."""
    from accuracy_db import nccl_public_markdown, nccl_transfer_check

    md = [
        HEADING,
        "",
        "Piecewise `latency + 2(n-1)/n·bytes/bus_bw` per group size (protocol switches fitted as breakpoints). "
        "Systems with a usable NCCL all-reduce table are fitted on its even half (rows above) and the fit is "
        "written into the intra-node link unless the link already holds a fit made on the device's own "
        "measurements: a100_sxm_80gb keeps its Vidur fit (its row above: Vidur times `torch.distributed` calls, "
        "a 45-50 us fixed cost against NCCL-tests' 10-30 us, so small messages differ by 2-3x; at 16-64 MiB the "
        "two are 13-27 % apart). h100_sxm and h200_sxm: every non-reserved NCCL table of theirs lacks all-reduce "
        "(nccl/2.23) or holds rows tagged with the reserved version 2.29.2 (h100 nccl/2.27.3, h200 nccl/2.26.2, "
        "refused by the reader). From 1 MiB their link carries a transfer (simcast.calib.fitting.nccl_transfer): "
        "a donor system's piecewise fit with its latencies kept and its bus bandwidths scaled per group size by "
        "the ratio of the two systems' large-message (>= 64 MiB) all-reduce bandwidth in the engines' own tables. "
        "The donor is chosen by the check below: each NVSwitch system with its own NCCL table predicts every other "
        "one (all rows; `below_1MiB`: messages under 1 MiB, the latency-bound band); the lowest mean median wins. "
        "Below 1 MiB they carry the bridge from their own reduce-scatter + all-gather rows "
        "(simcast.calib.fitting.nccl_bridge, after the next table). Public H100/H200 timings check both from "
        "outside the database (after the bridge).",
        "",
        markdown_table(nccl_transfer_check()),
        "",
    ]
    return md + bridge_markdown() + nccl_public_markdown()


def main() -> int:
    """Replace the section in docs/accuracy.md with a freshly generated one."""
    page = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"
    section = "\n".join(nccl_markdown()).rstrip("\n") + "\n"
    text = page.read_text()  # read after the (minutes-long) generation: edits meanwhile are kept
    start = text.index(HEADING + "\n")
    end = text.index("\n### ", start + len(HEADING))
    page.write_text(text[:start] + section + text[end:])
    print(f"wrote the NCCL section of {page}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())

"""Cross-version transfer of NCCL all-reduce and decode-attention fits on non-reserved aiconfigurator-core tables.

Usage (needs the optional extra): python scripts/kernel_version_transfer.py

The reserved check of issue 28 predicts a newer NCCL (2.29.2) on H100/H200. This script measures the same
shape on tables simcast may read: on each system with two or more NCCL versions, the piecewise fit
(:func:`simcast.calib.fitting.fit_collectives.fit_all_reduce`) of an older version predicts every row of a
newer one; the same-version odd half is printed for comparison. It also prints, per table, the ratio of
all-reduce time to reduce-scatter + all-gather time below 1 MiB (a candidate bridge from H100's own
NCCL 2.23 reduce-scatter / all-gather tables, which lack all-reduce). Reserved folders are refused by
:mod:`simcast.calib.readers.aic_db`'s guard and never listed. Decode attention: :func:`decode_b200` (the only
system with two non-reserved vLLM attention versions).
"""

from __future__ import annotations

import numpy as np

from simcast.calib.fitting import fit_collectives as fc
from simcast.calib.readers import aic_db
from simcast.calib.readers.db_split import held_out, version_key

SYSTEMS = ("b200_sxm", "b300_sxm", "gb200", "gb300")
SMALL = 2**20


def _cell(pred: np.ndarray, meas: np.ndarray, nbytes: np.ndarray) -> str:
    e = np.abs(pred / meas - 1) * 100
    s = nbytes < SMALL
    return (
        f"all {np.median(e):.1f} / {np.percentile(e, 90):.1f}, "
        f"<1 MiB {np.median(e[s]):.1f} / {np.percentile(e[s], 90):.1f}, "
        f"64 KiB-1 MiB median {np.median(e[s & (nbytes >= 2**16)]):.1f}"
    )


def decode_b200() -> None:
    """Decode attention, bf16, head 128, each table's main kernel (3000 sampled rows): B200 vLLM 0.22.0
    (FlashInfer decode) -> 0.24.0 (FlashInfer's trtllm-gen decode), and SGLang 0.5.14's trtllm_mha rows
    (same kernel family as 0.24's) -> vLLM 0.24.0, against each version's same-version odd half."""
    from simcast.calib.fitting.fit_decode import fit_decode
    from simcast.calib.fitting.fit_kernels import _attn_arrays
    from simcast.cost.kernels import attention as attn
    from simcast.inputs.loaders import load_device

    dev = load_device("b200")

    def rows(engine: str, version: str):
        r = aic_db.attention_rows("b200_sxm", engine, version, "b200")
        r = r[(r.kind == "attention_decode") & (r.dtype == "bf16") & (r.head_dim == 128)]
        r = r[r.op == r.op.value_counts().idxmax()]
        return r.sample(min(len(r), 3000), random_state=0)

    def err(fit_rows, test_rows) -> str:
        fit, _ = fit_decode(fit_rows, dev, "bf16", 148)
        a = _attn_arrays(test_rows)
        p = attn.decode_time_s(
            fit, dev.matmul_peak("bf16"), dev.hbm_bw_bytes_per_s, a["b"], a["kv"], a["h"], a["hkv"], a["d"], a["dv"]
        )
        e = np.abs(p / a["t"] - 1) * 100
        return f"{np.median(e):.1f} / {np.percentile(e, 90):.1f} (signed median {np.median(p / a['t'] - 1) * 100:+.1f})"

    old, new, sgl = rows("vllm", "0.22.0"), rows("vllm", "0.24.0"), rows("sglang", "0.5.14")
    print(f"b200 vllm 0.22 even -> odd: {err(old[~held_out(old)], old[held_out(old)])}")
    print(f"b200 vllm 0.24 even -> odd: {err(new[~held_out(new)], new[held_out(new)])}")
    print(f"b200 vllm 0.22 -> 0.24 (all rows): {err(old, new)}")
    print(f"b200 sglang 0.5.14 trtllm_mha -> vllm 0.24 (all rows): {err(sgl, new)}")


def main() -> None:
    for system in SYSTEMS:
        data = {}
        for v in sorted(aic_db.versions(system, "comm", "nccl"), key=version_key):
            r = aic_db.nccl_rows(system, v, system, ("all_reduce",))
            if len(r):
                data[v] = r
        for v, r in data.items():
            fits, _ = fc.fit_all_reduce(r[~held_out(r)])
            t = r[held_out(r)]
            cell = _cell(fc.predict_all_reduce(fits, t), t.time_s.values, t.bytes.values)
            print(f"{system} nccl/{v} same-version odd half: {cell}")
        for a in data:
            for b in data:
                if version_key(a) < version_key(b):
                    fits, _ = fc.fit_all_reduce(data[a])
                    t = data[b][data[b].gpus.isin(data[a].gpus.unique())]
                    cell = _cell(fc.predict_all_reduce(fits, t), t.time_s.values, t.bytes.values)
                    print(f"{system} nccl/{a} -> nccl/{b}: {cell}")
            df = aic_db.read_table(system, "comm", "nccl", a, "nccl_perf")
            df = df[df.nccl_dtype == "half"]
            g = df.groupby(["op_name", "num_gpus", "message_size"])["latency"].median().unstack(0)
            g = g.dropna(subset=["all_reduce", "all_gather", "reduce_scatter"])
            g = g[g.index.get_level_values(1) * 2 < SMALL]
            ratio = g["all_reduce"] / (g["all_gather"] + g["reduce_scatter"])
            print(
                f"{system} nccl/{a} all-reduce / (reduce-scatter + all-gather) below 1 MiB: median {ratio.median():.2f}"
            )


if __name__ == "__main__":
    main()
    decode_b200()

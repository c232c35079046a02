"""Read Vidur's profiling CSVs as they are and turn them into simcast's generic rows.

Vidur (microsoft/vidur, ``data/profiling/``) stores per-op CUDA-event timings in
milliseconds. Compute files (``compute/<gpu>/<model>_mlp.csv``) give, per
``(num_tokens, num_tensor_parallel_workers)``, the median time of each op of
one decoder layer; network files give NCCL all-reduce and send/recv times per
message ``size`` in bytes. Mapping (times ms → s, ``median`` columns):

* ``attn_pre_proj`` → GEMM m=tokens, n=(n_head + 2·n_kv_head)·head_dim/tp, k=n_embd
* ``attn_post_proj`` → GEMM m=tokens, n=n_embd, k=n_head·head_dim/tp
* ``mlp_up_proj`` → GEMM m=tokens, n=2·n_expanded_embd/tp, k=n_embd
* ``mlp_down_proj`` → GEMM m=tokens, n=n_embd, k=n_expanded_embd/tp
* norms → ``rms_norm``, ``attn_rope`` → ``rope``, ``mlp_act`` → ``silu_and_mul``, ``add`` → ``add``
* ``layer`` = the sum of those nine medians (Vidur profiles attention and collectives separately)
* ``all_reduce.csv`` → ``allreduce``, ``send_recv.csv`` → ``p2p``; ``nodes = num_workers / devices_per_node``
  (``devices_per_node`` is the GPUs per node the run used; ``max_devices_per_node`` the node's size).

Rows for 2048 tokens appear twice in the compute files: their medians are averaged.
Vidur layers run in fp16.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simcast.calib.readers.measured_schema import GENERIC_COLUMNS
from simcast.core.errors import require
from simcast.core.shards import shard
from simcast.inputs.files import load_csv, numeric_column
from simcast.inputs.limits import MAX_BATCHED_TOKENS, MAX_DEVICES, MAX_DEVICES_PER_NODE, MAX_HIDDEN, MAX_MESSAGE_BYTES

VIDUR_SNAPSHOT = "7d47513"
DEVICES = {"h100": "h100_sxm", "a100": "a100_sxm_80gb", "h100_dgx": "h100_sxm", "a100_dgx": "a100_sxm_80gb"}
LAYER_OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
COLUMNS = GENERIC_COLUMNS + ("model", "op", "source")


def is_vidur_file(path: str | Path) -> bool:
    """True for a Vidur compute (``*_mlp.csv``) or network (``all_reduce.csv``/``send_recv.csv``) file."""
    name = Path(path).name
    return name.endswith("_mlp.csv") or name in ("all_reduce.csv", "send_recv.csv")


def _device(path: Path) -> str:
    return DEVICES.get(path.parent.name, path.parent.name)


def _source(path: Path) -> str:
    parts = path.resolve().parts
    return "/".join(parts[parts.index("vidur") :]) if "vidur" in parts else path.name


_MAX_MS = 1e9  # a median op time in ms (11.6 days): finite and bounded


def _numeric(raw: pd.DataFrame, path: Path, bounds: dict[str, tuple[float, float, bool]]) -> pd.DataFrame:
    """``raw`` with the named columns checked (required, finite, in ``[lo, hi]``, whole when flagged) and numeric."""
    out = raw.copy()
    for col, (lo, hi, whole) in bounds.items():
        out[col] = numeric_column(raw, col, f"measured {path.name}", required=True, lo=lo, hi=hi, integer=whole)
    return out


def compute_rows(path: str | Path) -> pd.DataFrame:
    """Generic rows (GEMMs, elementwise ops, whole layer) from one Vidur ``*_mlp.csv``."""
    path = Path(path)
    keys = ["num_tokens", "num_tensor_parallel_workers"]
    cols = [f"time_stats.{op}.median" for op in LAYER_OPS]
    shape = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd"]
    raw = _numeric(
        load_csv(path, "measured"),
        path,
        {
            "num_tokens": (1, MAX_BATCHED_TOKENS, True),
            "num_tensor_parallel_workers": (1, MAX_DEVICES, True),
            **{c: (1, MAX_HIDDEN, True) for c in shape},
            **{c: (0.0, _MAX_MS, False) for c in cols},
        },
    )
    d = raw.groupby(keys, as_index=False).agg({**{c: "mean" for c in cols}, **{c: "first" for c in shape}})
    model = "meta-llama/" + path.name.removesuffix("_mlp.csv")
    base = {"device": _device(path), "dtype": "fp16", "model": model, "source": _source(path)}
    rows: list[dict] = []
    for r in d.to_dict("records"):
        t, tp = int(r["num_tokens"]), int(r["num_tensor_parallel_workers"])
        nh, nkv, h, ffn = (int(r[c]) for c in shape)
        sd = shard(hidden=h, heads=nh, kv_heads=nkv, head_dim=h // nh, intermediate=ffn, vocab=1, tp=tp, name=model)
        ms = {op: float(r[f"time_stats.{op}.median"]) for op in LAYER_OPS}
        common = {**base, "gpus": tp, "batch": t}
        for op, (m, n, k) in sd.gemm_shapes(t).items():
            rows.append({**common, "kind": "gemm", "op": op, "m": m, "n": n, "k": k, "time_s": ms[op] / 1e3})
        for op, kind, width in (
            ("input_layernorm", "rms_norm", h),
            ("post_attention_layernorm", "rms_norm", h),
            ("mlp_act", "silu_and_mul", 2 * sd.intermediate),
            ("add", "add", h),
        ):
            rows.append({**common, "kind": kind, "op": op, "m": t, "n": width, "time_s": ms[op] / 1e3})
        rows.append(
            {
                **common,
                "kind": "rope",
                "op": "attn_rope",
                "m": t,
                "heads": sd.q_heads,
                "kv_heads": sd.kv_heads,
                "head_dim": sd.head_dim,
                "time_s": ms["attn_rope"] / 1e3,
            }
        )
        rows.append({**common, "kind": "layer", "op": "layer", "time_s": sum(ms.values()) / 1e3})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def network_rows(path: str | Path) -> pd.DataFrame:
    """Generic ``allreduce``/``p2p`` rows from one Vidur ``all_reduce.csv`` or ``send_recv.csv``."""
    path = Path(path)
    raw = load_csv(path, "measured")
    kinds = {"all_reduce": "allreduce", "send_recv": "p2p", "all_gather": "allgather"}
    coll = raw["collective"].iloc[0] if "collective" in raw else None
    require(coll in kinds, f"measured {path.name}: column collective", coll, f"allowed: {', '.join(kinds)}")
    raw = _numeric(
        raw,
        path,
        {
            "size": (1, MAX_MESSAGE_BYTES, False),
            "num_workers": (1, MAX_DEVICES, True),
            "devices_per_node": (1, MAX_DEVICES_PER_NODE, True),
            f"time_stats.{coll}.median": (0.0, _MAX_MS, False),
        },
    )
    kind = kinds[str(coll)]
    out = pd.DataFrame(
        {
            "kind": kind,
            "device": _device(path),
            "dtype": "fp16",
            "bytes": raw["size"].astype(float),
            "gpus": raw["num_workers"].astype(int),
            "nodes": (raw["num_workers"] // raw["devices_per_node"]).astype(int),
            "time_s": raw[f"time_stats.{coll}.median"].astype(float) / 1e3,
            "op": coll,
            "source": _source(path),
        }
    )
    return out.reindex(columns=list(COLUMNS))


def read_vidur(path: str | Path) -> pd.DataFrame:
    """Generic rows from any Vidur profiling CSV (compute or network)."""
    name = Path(path).name
    return compute_rows(path) if name.endswith("_mlp.csv") else network_rows(path)

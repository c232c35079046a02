"""The flags of ``simcast kernel``, ``simcast calibrate`` and ``simcast validate``, each declared once as an
options field with its :class:`Flag` (default, unit, help, check) (edge module).

``kernel``'s subcommands share one dataclass: a flag two subcommands spell alike but read differently
(``--dtype``: GEMM's five element types, attention's three; ``--engine``: ``allreduce`` also takes nccl) is
two fields with the same ``dest``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simcast.api.options import Flag, opt, required
from simcast.engines import ENGINES, NCCL

_ENGINE_HELP = (
    "use the profile's fitted kernels of this engine (allreduce: its own all-reduce as it issues it; nccl: "
    "NCCL's own) [default: generic roofline / NCCL link fits]"
)


def _dim(d: str) -> Flag:
    return Flag(names=(f"--{d}",), help=f"GEMM dimension {d.upper()} [<= 2^31-1]", value_type="gemm_dim")


@dataclass(frozen=True, kw_only=True)
class KernelFlags:
    """``simcast kernel``'s flags: the device, the kernel's shape and the engine whose fits cost it."""

    device: str = field(
        metadata=required(
            "the device profile",
            flag=Flag(names=("--device",), help="shipped device profile (e.g. h100_sxm) or a YAML path"),
        )
    )
    json: bool = opt(
        False,
        "print the prediction as JSON",
        flag=Flag(names=("--json",), help="print the prediction as JSON", action="store_true"),
    )
    engine: str | None = opt(
        None,
        "the engine whose fitted kernels cost it (None: the generic roofline)",
        flag=Flag(names=("--engine",), help=_ENGINE_HELP, choices=ENGINES),
    )
    allreduce_engine: str | None = opt(
        None,
        "the engine (or nccl) whose all-reduce costs it (None: NCCL link fits)",
        flag=Flag(names=("--engine",), help=_ENGINE_HELP, choices=(*ENGINES, NCCL), dest="engine"),
    )
    m: int = field(metadata=required("GEMM rows of A and C", flag=_dim("m")))
    n: int = field(metadata=required("GEMM columns of B and C", flag=_dim("n")))
    k: int = field(metadata=required("GEMM reduction dimension", flag=_dim("k")))
    gemm_dtype: str = opt(
        "bf16",
        "GEMM element type",
        flag=Flag(
            names=("--dtype",),
            help="[default bf16]; fp8_block (128x128 block-scaled fp8) needs --engine",
            choices=("bf16", "fp16", "fp8", "fp8_block", "fp32"),
            dest="dtype",
        ),
    )
    phase: str = field(
        metadata=required(
            "prefill or decode attention",
            flag=Flag(names=("--phase",), help="prefill or decode attention kernel", choices=("prefill", "decode")),
        )
    )
    batch: int = opt(
        1, "requests", flag=Flag(names=("--batch",), help="requests [default 1, <= 10^6]", value_type="requests")
    )
    q_len: int = opt(
        1,
        "new tokens per request",
        flag=Flag(names=("--q-len",), help="new tokens per request [default 1, <= 10^7]", value_type="tokens"),
    )
    kv_len: int = field(
        metadata=required(
            "keys per request incl. the new tokens",
            flag=Flag(names=("--kv-len",), help="keys per request incl. the new tokens [<= 10^7]", value_type="tokens"),
        )
    )
    heads: int = field(
        metadata=required(
            "query heads on this GPU",
            flag=Flag(names=("--heads",), help="query heads on this GPU", value_type="heads"),
        )
    )
    kv_heads: int = field(
        metadata=required(
            "KV heads on this GPU", flag=Flag(names=("--kv-heads",), help="KV heads on this GPU", value_type="heads")
        )
    )
    head_dim: int = opt(
        128, "elements per head", flag=Flag(names=("--head-dim",), help="[default 128]", value_type="head_dim")
    )
    attention_dtype: str = opt(
        "bf16",
        "attention element type",
        flag=Flag(names=("--dtype",), help="[default bf16]", choices=("bf16", "fp16", "fp8"), dest="dtype"),
    )
    message_bytes: float = field(
        metadata=required(
            "message bytes per rank",
            flag=Flag(
                names=("--bytes",),
                help="message bytes per rank (all-gather: output bytes per rank) [<= 2^50]",
                value_type="message_bytes",
                dest="bytes",
            ),
        )
    )
    cross_node: bool = opt(
        False,
        "the two GPUs are on different nodes",
        flag=Flag(names=("--cross-node",), help="the two GPUs are on different nodes", action="store_true"),
    )
    gpus: int = field(
        metadata=required(
            "ranks in the group",
            flag=Flag(names=("--gpus",), help="ranks in the group [<= 65536]", value_type="devices"),
        )
    )
    nodes: int = opt(
        1,
        "nodes the group spans",
        flag=Flag(names=("--nodes",), help="nodes the group spans [default 1]", value_type="devices"),
    )


KERNEL_FLAGS = {
    "gemm": ("m", "n", "k", "gemm_dtype"),
    "attention": ("phase", "batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim", "attention_dtype"),
    "allreduce": ("message_bytes", "gpus", "nodes"),
    "allgather": ("message_bytes", "gpus", "nodes"),
    "p2p": ("message_bytes", "cross_node"),
}
"""Each ``kernel`` subcommand's own flags (after ``--device``, ``--json`` and its ``--engine``), in ``--help`` order."""


@dataclass(frozen=True, kw_only=True)
class CalibrateFlags:
    """``simcast calibrate``'s flags (the measured CSVs are a positional; ``--from-db``'s: ``calibrate_db``)."""

    device: str | None = opt(
        None,
        "the profile to start from",
        flag=Flag(
            names=("--device",),
            help="profile to start from (shipped name or YAML path); with --from-db default: the system's",
        ),
    )
    out: str = field(
        metadata=required(
            "the profile YAML written",
            flag=Flag(
                names=("--out",),
                help="YAML file to write, named after the profile (<name>.yaml); may be the --device file it "
                "refits, never a measured CSV, the template, the --transfer-from profile or a file of simcast's "
                "installed data",
                value_type="output_path",
            ),
        )
    )
    transfer_from: str | None = opt(
        None,
        "a calibrated profile whose efficiencies and links are carried over",
        flag=Flag(
            names=("--transfer-from",),
            help="instead of fitting, carry over a calibrated profile's efficiencies and links, scaled to "
            "--device's peaks and link bandwidths",
        ),
    )
    device_template: str | None = opt(
        None,
        "the shipped profile a new device's unmeasured values come from",
        flag=Flag(
            names=("--device-template",),
            help="a new device: the measured CSV (simcast microbench --out) names it; this shipped profile (or "
            "YAML) supplies every value the CSV does not measure, labelled carried over; measured peaks, HBM "
            "bandwidth and capacity replace the template's, the fit replaces efficiencies and links the rows cover",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class ValidateFlags:
    """``simcast validate``'s flags (the measured CSV is a positional)."""

    device: str | None = opt(
        None,
        "the profile every row is predicted on (None: each row's device column)",
        flag=Flag(names=("--device",), help="predict every row on this profile instead of its device column"),
    )
    engine: str | None = opt(
        None,
        "the engine of rows without one",
        flag=Flag(
            names=("--engine",),
            help="engine for rows without an engine column value (the profile's fitted kernels of that engine)",
            choices=(*ENGINES, NCCL),
        ),
    )
    json: bool = opt(
        False,
        "one JSON object per row",
        flag=Flag(
            names=("--json",), help="print one JSON object per row: its columns + predicted_s", action="store_true"
        ),
    )

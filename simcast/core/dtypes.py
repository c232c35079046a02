"""The one table of number formats: bytes per element, the matmul peak a GEMM in it runs at, aliases.

Every byte size simcast uses for a dtype or a weight format is read from :data:`FORMATS` (through the
views below); no other module writes a name -> bytes mapping (``tests/core/test_dtypes.py`` greps for one).

- ``element_bytes``: bytes of one stored value, scales excluded (what a kernel's shape model counts).
- ``bytes_per_element``: bytes per weight element with its scales (what memory holds):
  fp8 block-scaled: 1 byte + one fp32 scale per 128x128 block (DeepSeek-V3 / Qwen3-FP8 checkpoints);
  mxfp4: 4-bit e2m1 values + one 8-bit e8m0 scale per 32 values (OCP MX spec) = 4.25 bits;
  nvfp4: 4-bit e2m1 values + one fp8 e4m3 scale per 16 values = 4.5 bits (NVIDIA ModelOpt ``NVFP4``,
  ``group_size: 16``); its second-level fp32 scales (``weight_scale_2``, ``input_scale``: 8 bytes per
  linear layer) are below 1e-6 of any layer and left out.
- ``peak_dtype``: whose matmul peak a GEMM with weights in this format runs at: fp8 weights run w8a8
  at the fp8 peak; mxfp4 (gpt-oss) runs w4a16 (weights dequantised in the kernel) at the 16-bit peak;
  nvfp4 and mxfp4_w4a4 (AMD Quark ``w_mxfp4_a_mxfp4``) quantise the activations to fp4 too and run W4A4
  at the ``fp4`` peak where the device has one (:func:`gemm_compute_dtype`).
- ``aliases``: the names torch and the measured-kernel database (aiconfigurator-core) use.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class NumberFormat:
    """One dtype or weight format (bytes per element, see the module docstring)."""

    name: str
    element_bytes: float
    bytes_per_element: float
    peak_dtype: str
    is_float8: bool = False
    activation: bool = False  # a model / activation / KV-cache dtype (``torch_dtype``, ``--dtype``)
    weight: bool = False  # a weight format of ``quantization_config`` (``model.quantization.*``)
    kv_cache: bool = False  # a block-scaled ``--kv-cache-dtype`` beyond the activation dtypes (nvfp4)
    aliases: tuple[str, ...] = ()


FORMATS: tuple[NumberFormat, ...] = (
    NumberFormat(
        name="fp32",
        element_bytes=4,
        bytes_per_element=4.0,
        peak_dtype="fp32",
        activation=True,
        weight=True,
        aliases=("float32",),
    ),
    NumberFormat(
        name="bf16",
        element_bytes=2,
        bytes_per_element=2.0,
        peak_dtype="bf16",
        activation=True,
        weight=True,
        aliases=("bfloat16",),
    ),
    NumberFormat(
        name="fp16",
        element_bytes=2,
        bytes_per_element=2.0,
        peak_dtype="fp16",
        activation=True,
        weight=True,
        aliases=("float16", "half"),
    ),
    NumberFormat(
        name="fp8",
        element_bytes=1,
        bytes_per_element=1.0,
        peak_dtype="fp8",
        is_float8=True,
        activation=True,
        weight=True,
        aliases=("float8_e4m3fn",),
    ),
    NumberFormat(
        name="fp8_block",
        element_bytes=1,
        bytes_per_element=1.0 + 4.0 / (128 * 128),
        peak_dtype="fp8",
        is_float8=True,
        weight=True,
    ),
    NumberFormat(name="mxfp4", element_bytes=0.5, bytes_per_element=4.25 / 8, peak_dtype="bf16", weight=True),
    NumberFormat(name="mxfp4_w4a4", element_bytes=0.5, bytes_per_element=4.25 / 8, peak_dtype="fp4", weight=True),
    NumberFormat(
        name="nvfp4", element_bytes=0.5, bytes_per_element=0.5 + 1.0 / 16, peak_dtype="fp4", weight=True, kv_cache=True
    ),
    NumberFormat(name="fp4", element_bytes=0.5, bytes_per_element=0.5, peak_dtype="fp4", aliases=("float4_e2m1",)),
    NumberFormat(name="int8", element_bytes=1, bytes_per_element=1.0, peak_dtype="int8"),
)
"""Every format simcast knows, canonical name first."""

_BY_NAME = {f.name: f for f in FORMATS}
_BY_ALIAS = {a: f for f in FORMATS for a in (f.name, *f.aliases)}

DTYPE_BYTES: dict[str, int] = {f.name: int(f.element_bytes) for f in FORMATS if f.activation}
"""Bytes per element of the model / activation / KV-cache dtypes (``fp32``, ``bf16``, ``fp16``, ``fp8``)."""

KV_CACHE_BYTES: dict[str, float] = {f.name: f.bytes_per_element for f in FORMATS if f.activation or f.kv_cache}
"""Bytes per KV-cache element, block scales included, of every ``--kv-cache-dtype``: the activation dtypes
(a per-tensor scale, nothing per element) and nvfp4 (4-bit e2m1 values + one 1-byte scale per 16 values =
0.5625 bytes; :mod:`simcast.core.kv` cites the engines' cache layouts)."""

FP4_KV_CACHE_DTYPES: tuple[str, ...] = tuple(f.name for f in FORMATS if f.kv_cache)
"""``--kv-cache-dtype`` values that store 4-bit values (the engines' FP4 KV caches)."""

WEIGHT_FORMAT_BYTES: dict[str, float] = {f.name: f.bytes_per_element for f in FORMATS if f.weight}
"""Bytes per weight element, scales included, of every weight format a checkpoint may declare."""

PEAK_DTYPE: dict[str, str] = {f.name: f.peak_dtype for f in FORMATS if f.weight}
"""Weight format -> the dtype of the matmul peak its GEMMs run at."""

MATMUL_PEAK_DTYPES: tuple[str, ...] = (*DTYPE_BYTES, "fp4")
"""Keys a device profile's ``matmul_flops_per_s`` may hold: the activation dtypes and ``fp4`` (FP4 tensor
cores: NVIDIA Blackwell NVFP4/MXFP4, AMD CDNA4 MXFP4; Hopper and CDNA3 have none)."""

FP4_ACTIVATION_FORMATS: tuple[str, ...] = tuple(f.name for f in FORMATS if f.weight and f.peak_dtype == "fp4")
"""Weight formats whose GEMMs quantise the activations to fp4 as well (W4A4) where the device has fp4 tensor
cores; elsewhere they run weight-only (W4A16), as the engines do."""


def number_format(name: str) -> NumberFormat:
    """The format called ``name`` or one of its aliases (``bfloat16``, ``half``); KeyError if unknown."""
    return _BY_ALIAS[name]


def element_bytes(name: str) -> float:
    """Bytes of one stored value of ``name`` (or an alias), scales excluded."""
    return _BY_ALIAS[name].element_bytes


def gemm_compute_dtype(fmt: str, model_dtype: str, has_fp4: bool = False) -> str:
    """Compute dtype of a GEMM with weights in ``fmt``: float8 weights run w8a8 at the fp8 peak; nvfp4 and
    mxfp4_w4a4 run W4A4 at the fp4 peak on a device with one (``has_fp4``); any other format, and fp4 formats
    on a device without fp4 tensor cores (Hopper, CDNA3: the engines' weight-only Marlin / dequantising
    kernels, W4A16), at the model dtype's. vLLM on a GPU without native FP4 repacks NVFP4 and MXFP4 linear and
    MoE weights for its Marlin W4A16 kernel ("Weight-only FP4 compression will be used leveraging the Marlin
    kernel": ``prepare_fp4_layer_for_marlin`` / ``prepare_moe_fp4_layer_for_marlin``,
    vllm-project/vllm ``vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py``@de5f26d5)."""
    f = _BY_NAME.get(fmt)
    if f is not None and f.peak_dtype == "fp4":
        return "fp4" if has_fp4 else model_dtype
    return "fp8" if f is not None and f.is_float8 else model_dtype
